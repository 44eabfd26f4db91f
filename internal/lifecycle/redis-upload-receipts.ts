/**
 * Upload receipts as artifact references on Redis (port.ts UploadReceiptRefs): a live
 * receipt is the member `u:{tenant}` of the blob's `artifact:refs:{digest}` set — the set the
 * append script adds a run to when its events name the blob — so a deletion counts it like
 * a run (redis-run-deletion.ts RELEASE_LUA). Its expiry is the score of `{digest}{tenant}`
 * in `artifact:receipts`; the sweep pops expired ones and drops their member in one script.
 *
 * Must never: drop a member whose receipt has not expired, answer a blob free while any
 * member is left, or pop one expired receipt for two sweepers.
 */
import type { Redis } from "ioredis";
import { wrapRedis } from "../eventlog/redis-error.ts";
import { logKeys } from "../eventlog/redis-log-keys.ts";
import type { ExpiredReceipt, UploadReceiptRefs } from "./port.ts";

/** How long a deletion's "removing" mark lives when the deleting process dies before clearing it. */
export const REMOVING_MARK_MS = 60_000;

/** KEYS: refs set, receipts zset, removing mark. ARGV: member, zset member, expiry ms. */
const HOLD_LUA = `redis.call('SADD', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], 'GT', ARGV[3], ARGV[2])
return redis.call('EXISTS', KEYS[3])`;

/** KEYS: receipts zset. ARGV: zset member, now ms, until ms. 1: held (and extended). */
const RENEW_LUA = `local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not s or tonumber(s) <= tonumber(ARGV[2]) then return 0 end
if tonumber(s) < tonumber(ARGV[3]) then redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1]) end
return 1`;

/** KEYS: refs set, receipts zset, removing mark. ARGV: member, zset member, mark ms. 1: free. */
const RELEASE_LUA = `redis.call('ZREM', KEYS[2], ARGV[2])
redis.call('SREM', KEYS[1], ARGV[1])
if redis.call('SCARD', KEYS[1]) > 0 then return 0 end
redis.call('SET', KEYS[3], '1', 'PX', ARGV[3])
return 1`;

/**
 * KEYS: receipts zset. ARGV: now ms, limit, key prefix, removing-mark ms.
 * Reply: flat {zset member, free (0/1)} pairs. Keys built here from the prefix, as the
 * append script builds the refs keys (one Redis, no cluster slots).
 */
const EXPIRE_LUA = `local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for _, m in ipairs(due) do
  local d = string.sub(m, 1, 64)
  local refs = ARGV[3] .. 'artifact:refs:' .. d
  redis.call('ZREM', KEYS[1], m)
  redis.call('SREM', refs, 'u:' .. string.sub(m, 65))
  local free = 0
  if redis.call('SCARD', refs) == 0 then
    redis.call('SET', ARGV[3] .. 'artifact:removing:' .. d, '1', 'PX', ARGV[4])
    free = 1
  end
  out[#out + 1] = m
  out[#out + 1] = free
end
return out`;

type Scripts = {
  agentdReceiptHold: (
    a: string,
    b: string,
    c: string,
    m: string,
    z: string,
    e: number,
  ) => Promise<number>;
  agentdReceiptRelease: (
    a: string,
    b: string,
    c: string,
    m: string,
    z: string,
    ms: number,
  ) => Promise<number>;
  agentdReceiptRenew: (k: string, z: string, now: number, until: number) => Promise<number>;
  agentdReceiptExpire: (
    k: string,
    now: number,
    limit: number,
    p: string,
    ms: number,
  ) => Promise<(string | number)[]>;
};

/** The refs-set member of a tenant's receipt (run ids are ULIDs: never `u:`-prefixed). */
export const receiptMember = (tenantId: string): string => `u:${tenantId}`;

export class RedisUploadReceipts implements UploadReceiptRefs {
  readonly #client: Redis;
  readonly #prefix: string;
  readonly #keys: ReturnType<typeof logKeys>;
  readonly #scripts: Scripts;
  /** Builds the runs' reference sets before the first expiry decides a blob is free. */
  readonly #ensureRefs: () => Promise<void>;

  constructor(client: Redis, prefix: string, ensureRefs: () => Promise<void>) {
    this.#client = client;
    this.#prefix = prefix;
    this.#keys = logKeys(prefix);
    this.#ensureRefs = ensureRefs;
    client.defineCommand("agentdReceiptHold", { numberOfKeys: 3, lua: HOLD_LUA });
    client.defineCommand("agentdReceiptRelease", { numberOfKeys: 3, lua: RELEASE_LUA });
    client.defineCommand("agentdReceiptRenew", { numberOfKeys: 1, lua: RENEW_LUA });
    client.defineCommand("agentdReceiptExpire", { numberOfKeys: 1, lua: EXPIRE_LUA });
    this.#scripts = client as unknown as Scripts;
  }

  async hold(tenantId: string, digest: string, expiresAt: number): Promise<boolean> {
    const k = this.#keys;
    const removing = await wrapRedis(
      this.#scripts.agentdReceiptHold(
        k.artifactRefs(digest),
        k.artifactReceipts,
        k.artifactRemoving(digest),
        receiptMember(tenantId),
        digest + tenantId,
        expiresAt,
      ),
    );
    return Number(removing) === 1;
  }

  async release(holder: string, digest: string): Promise<boolean> {
    await this.#ensureRefs();
    const k = this.#keys;
    const free = await wrapRedis(
      this.#scripts.agentdReceiptRelease(
        k.artifactRefs(digest),
        k.artifactReceipts,
        k.artifactRemoving(digest),
        receiptMember(holder),
        digest + holder,
        REMOVING_MARK_MS,
      ),
    );
    return Number(free) === 1;
  }

  async removing(digest: string): Promise<boolean> {
    return (await wrapRedis(this.#client.exists(this.#keys.artifactRemoving(digest)))) === 1;
  }

  async renew(tenantId: string, digest: string, now: number, until: number): Promise<boolean> {
    const r = await wrapRedis(
      this.#scripts.agentdReceiptRenew(this.#keys.artifactReceipts, digest + tenantId, now, until),
    );
    return Number(r) === 1;
  }

  async expire(now: number, limit: number): Promise<ExpiredReceipt[]> {
    await this.#ensureRefs();
    const flat = await wrapRedis(
      this.#scripts.agentdReceiptExpire(
        this.#keys.artifactReceipts,
        now,
        limit,
        this.#prefix,
        REMOVING_MARK_MS,
      ),
    );
    const out: ExpiredReceipt[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const m = String(flat[i]);
      out.push({ digest: m.slice(0, 64), tenantId: m.slice(64), free: Number(flat[i + 1]) === 1 });
    }
    return out;
  }

  async tenantDigests(tenantId: string): Promise<string[]> {
    // Members are {digest}{tenant}; the MATCH narrows, the exact tail decides ("a" is not "ba").
    const out: string[] = [];
    let cursor = "0";
    do {
      const [next, flat] = await wrapRedis(
        this.#client.zscan(
          this.#keys.artifactReceipts,
          cursor,
          "MATCH",
          `*${tenantId}`,
          "COUNT",
          1000,
        ),
      );
      for (let i = 0; i < flat.length; i += 2) {
        const m = flat[i] as string;
        if (m.slice(64) === tenantId) out.push(m.slice(0, 64));
      }
      cursor = next;
    } while (cursor !== "0");
    return [...new Set(out)];
  }

  async removed(digests: readonly string[]): Promise<void> {
    if (digests.length === 0) return;
    await wrapRedis(this.#client.del(...digests.map((d) => this.#keys.artifactRemoving(d))));
  }
}
