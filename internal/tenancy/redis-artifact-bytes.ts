/**
 * TenantArtifactLedger on Redis, shared by every server and worker:
 *
 *   tenant:{t}:artifacts        hash    digest -> size: the blobs counted for the tenant
 *   tenant:{t}:artifact-bytes   string  their total
 *
 * Charge and release are one script each, so the total is always the hash's sum.
 * Must never: keep counts in process memory, or count a digest twice for one tenant.
 */
import type { Redis } from "ioredis";
import { wrapRedis } from "../eventlog/redis-error.ts";
import type { TenantArtifactLedger } from "./artifact-bytes.ts";

/** KEYS: hash, total. ARGV: digest, size. Answers the total after. */
const CHARGE_LUA = `if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 1 then
  return redis.call('INCRBY', KEYS[2], ARGV[2])
end
return tonumber(redis.call('GET', KEYS[2]) or '0')`;

/** KEYS: hash, total. ARGV: digest. */
const RELEASE_LUA = `local s = redis.call('HGET', KEYS[1], ARGV[1])
if s then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('DECRBY', KEYS[2], s)
end
return 0`;

type Scripts = {
  agentdArtifactCharge: (h: string, t: string, d: string, size: number) => Promise<number>;
  agentdArtifactRelease: (h: string, t: string, d: string) => Promise<number>;
};

export class RedisArtifactLedger implements TenantArtifactLedger {
  readonly #client: Redis;
  readonly #prefix: string;
  readonly #scripts: Scripts;

  constructor(opts: { client: Redis; prefix?: string }) {
    this.#client = opts.client;
    this.#prefix = opts.prefix ?? "agentd:";
    opts.client.defineCommand("agentdArtifactCharge", { numberOfKeys: 2, lua: CHARGE_LUA });
    opts.client.defineCommand("agentdArtifactRelease", { numberOfKeys: 2, lua: RELEASE_LUA });
    this.#scripts = opts.client as unknown as Scripts;
  }

  #keys(tenantId: string): [string, string] {
    const t = `${this.#prefix}tenant:${tenantId}`;
    return [`${t}:artifacts`, `${t}:artifact-bytes`];
  }

  async charge(tenantId: string, digest: string, size: number): Promise<number> {
    const [h, t] = this.#keys(tenantId);
    return Number(await wrapRedis(this.#scripts.agentdArtifactCharge(h, t, digest, size)));
  }

  async release(tenantId: string, digest: string): Promise<void> {
    const [h, t] = this.#keys(tenantId);
    await wrapRedis(this.#scripts.agentdArtifactRelease(h, t, digest));
  }

  async bytesOf(tenantId: string): Promise<number> {
    const v = await wrapRedis(this.#client.get(this.#keys(tenantId)[1]));
    return Number(v ?? 0);
  }
}
