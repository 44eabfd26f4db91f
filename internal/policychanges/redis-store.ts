/**
 * Policy changes in Redis: one string key per change holding it as JSON, a sorted set per
 * tenant and one for every tenant (by proposal time) to list them. Proposing is SET NX;
 * settling and reopening are compare-and-set scripts on the stored state, so of two
 * servers settling one change at once exactly one wins.
 *
 * Must never: overwrite a change it did not check first (every write is NX or a script).
 */
import type { Redis } from "ioredis";
import {
  type PolicyChangeStore,
  parseStored,
  type Settlement,
  type StoredPolicyChange,
  settled,
} from "./port.ts";

/** KEYS[1]: the change; ARGV[1]: the state it must have, ARGV[2]: settledBy ('' any), ARGV[3]: the new JSON. */
const CAS = `local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local c = cjson.decode(v)
if c.state ~= ARGV[1] then return 0 end
if ARGV[2] ~= '' and c.settledBy ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[1], ARGV[3])
return 1`;

export class RedisPolicyChangeStore implements PolicyChangeStore {
  readonly #client: Redis;
  readonly #prefix: string;

  constructor(opts: { client: Redis; prefix?: string }) {
    this.#client = opts.client;
    this.#prefix = opts.prefix ?? "agentd:";
  }

  #key(id: string): string {
    return `${this.#prefix}pchange:${id}`;
  }

  #index(tenantId: string | undefined): string {
    return tenantId === undefined
      ? `${this.#prefix}pchanges:all`
      : `${this.#prefix}pchanges:t:${tenantId}`;
  }

  async propose(c: StoredPolicyChange): Promise<StoredPolicyChange> {
    const ok = await this.#client.set(this.#key(c.id), JSON.stringify(c), "NX");
    if (ok !== "OK") {
      const held = await this.get(c.id);
      if (held !== undefined) return held;
      throw new Error(`policy change ${c.id} exists but cannot be read`);
    }
    await this.#client
      .multi()
      .zadd(this.#index(c.tenantId), c.proposedAt, c.id)
      .zadd(this.#index(undefined), c.proposedAt, c.id)
      .exec();
    return c;
  }

  async get(id: string): Promise<StoredPolicyChange | undefined> {
    const v = await this.#client.get(this.#key(id));
    if (v === null) return undefined;
    try {
      return parseStored(JSON.parse(v));
    } catch {
      return undefined;
    }
  }

  async list(tenantId: string | undefined, limit = 500): Promise<StoredPolicyChange[]> {
    const ids = await this.#client.zrevrange(this.#index(tenantId), 0, limit - 1);
    if (ids.length === 0) return [];
    const values = await this.#client.mget(ids.map((id) => this.#key(id)));
    const out: StoredPolicyChange[] = [];
    for (const v of values) {
      if (v === null) continue;
      try {
        const c = parseStored(JSON.parse(v));
        if (c !== undefined && (tenantId === undefined || c.tenantId === tenantId)) out.push(c);
      } catch {
        // a corrupt value is skipped, never listed
      }
    }
    return out;
  }

  async settle(id: string, s: Settlement): Promise<StoredPolicyChange | undefined> {
    const c = await this.get(id);
    if (c === undefined || c.state !== "pending") return undefined;
    const next = settled(c, s);
    const won = await this.#client.eval(CAS, 1, this.#key(id), "pending", "", JSON.stringify(next));
    return won === 1 ? next : undefined;
  }

  async dropTenant(tenantId: string): Promise<number> {
    const index = this.#index(tenantId);
    const ids = await this.#client.zrange(index, "0", "-1");
    for (let i = 0; i < ids.length; i += 500) {
      const batch = ids.slice(i, i + 500);
      await this.#client
        .multi()
        .del(...batch.map((id) => this.#key(id)))
        .zrem(this.#index(undefined), ...batch)
        .zrem(index, ...batch)
        .exec();
    }
    return ids.length;
  }

  async reopen(id: string, s: Settlement): Promise<boolean> {
    const c = await this.get(id);
    if (c === undefined || c.state !== s.state || c.settledAt !== s.at) return false;
    const { settledAt: _a, settledBy: _b, reason: _r, oldDigest: _o, newDigest: _n, ...rest } = c;
    const next: StoredPolicyChange = { ...rest, state: "pending" };
    const won = await this.#client.eval(CAS, 1, this.#key(id), s.state, s.by, JSON.stringify(next));
    return won === 1;
  }
}
