/**
 * Idempotency keys in Redis: one string key per (tenant, key) holding the claim as JSON,
 * set with NX and a TTL; replace and release are compare-and-set scripts on the run id.
 * The Redis key is a sha256 of tenant and key (bounded length, no separator tricks).
 *
 * Must never: overwrite a claim of another run (every write is NX or checks the run id).
 */
import { createHash } from "node:crypto";
import type { Redis } from "ioredis";
import { IDEMPOTENCY_TTL_MS, type IdempotencyClaim, type IdempotencyStore } from "./port.ts";

const CAS = `local v = redis.call('GET', KEYS[1])
if not v then return 0 end
if cjson.decode(v).runId ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end
return 1`;

/**
 * KEYS[1]: the run's pointer to its key; ARGV[1]: run id, ARGV[2]: the deleted claim.
 * The key keeps its expiry; the pointer goes.
 */
const FORGET = `local k = redis.call('GET', KEYS[1])
if not k then return 0 end
local v = redis.call('GET', k)
if v and cjson.decode(v).runId == ARGV[1] then redis.call('SET', k, ARGV[2], 'KEEPTTL') end
redis.call('DEL', KEYS[1])
return 1`;

export class RedisIdempotencyStore implements IdempotencyStore {
  readonly #client: Redis;
  readonly #prefix: string;
  readonly #ttlMs: number;
  readonly #now: () => number;

  constructor(opts: { client: Redis; prefix?: string; ttlMs?: number; now?: () => number }) {
    this.#client = opts.client;
    this.#prefix = opts.prefix ?? "agentd:";
    this.#ttlMs = opts.ttlMs ?? IDEMPOTENCY_TTL_MS;
    this.#now = opts.now ?? Date.now;
  }

  #key(tenantId: string, key: string): string {
    const h = createHash("sha256").update(tenantId).update("\0").update(key).digest("hex");
    return `${this.#prefix}idem:${h}`;
  }

  /** The run's pointer to its key (for forgetRun: keys are hashes, not findable by run). */
  #pointer(runId: string): string {
    return `${this.#prefix}idem:run:${runId}`;
  }

  async claim(tenantId: string, key: string, c: { runId: string; digest: string }) {
    const k = this.#key(tenantId, key);
    const value = JSON.stringify({ runId: c.runId, digest: c.digest, at: this.#now() });
    for (let i = 0; i < 3; i++) {
      // The pointer first: a pointer without its claim is harmless (forgetRun checks the run).
      await this.#client.set(this.#pointer(c.runId), k, "PX", this.#ttlMs);
      if ((await this.#client.set(k, value, "PX", this.#ttlMs, "NX")) === "OK") return undefined;
      await this.#client.del(this.#pointer(c.runId));
      const held = await this.#client.get(k);
      if (held !== null) return JSON.parse(held) as IdempotencyClaim;
      // It expired between the two commands: claim again.
    }
    throw new Error("idempotency key churned three times in a row");
  }

  async replace(
    tenantId: string,
    key: string,
    prevRunId: string,
    next: { runId: string; digest: string },
  ): Promise<boolean> {
    const value = JSON.stringify({ ...next, at: this.#now() });
    const k = this.#key(tenantId, key);
    await this.#client.set(this.#pointer(next.runId), k, "PX", this.#ttlMs);
    return (await this.#client.eval(CAS, 1, k, prevRunId, value, this.#ttlMs)) === 1;
  }

  async forgetRun(_tenantId: string, runId: string): Promise<void> {
    const deleted = JSON.stringify({ runId: "", digest: "", at: this.#now(), deleted: true });
    await this.#client.eval(FORGET, 1, this.#pointer(runId), runId, deleted);
  }

  async release(tenantId: string, key: string, runId: string): Promise<void> {
    await this.#client.eval(CAS, 1, this.#key(tenantId, key), runId, "", 0);
  }
}
