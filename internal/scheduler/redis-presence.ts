/**
 * WorkerPresence on Redis: one hash per worker, `${prefix}worker:{id}:presence`, fields
 * `seen` (Redis TIME, ms, of the last beat) and `ttl`, kept RECORD_KEEP_MS after the last
 * beat. Both scripts read Redis's clock, so no worker's own clock matters.
 * Must never keep state in process memory.
 */
import type { Redis } from "ioredis";
import { wrapRedis } from "../eventlog/redis-error.ts";
import { checkTtl, checkWorkerId } from "./options.ts";
import { type PresenceState, RECORD_KEEP_MS, type WorkerPresence } from "./presence.ts";

const NOW = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;

/** KEYS: record. ARGV: ttl ms, keep ms. */
const BEAT_LUA = `${NOW}
redis.call('HSET', KEYS[1], 'seen', now, 'ttl', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`;

/** KEYS: record. Reply "alive" | "dead" | "unknown". */
const STATE_LUA = `${NOW}
local f = redis.call('HMGET', KEYS[1], 'seen', 'ttl')
if not f[1] or not f[2] then return 'unknown' end
if now - tonumber(f[1]) > tonumber(f[2]) then return 'dead' end
return 'alive'`;

type Scripts = {
  agentdPresenceBeat(key: string, ttl: number, keep: number): Promise<number>;
  agentdPresenceState(key: string): Promise<string>;
};

export class RedisWorkerPresence implements WorkerPresence {
  readonly #scripts: Scripts;
  readonly #prefix: string;

  constructor(opts: { client: Redis; prefix?: string }) {
    this.#prefix = opts.prefix ?? "agentd:";
    opts.client.defineCommand("agentdPresenceBeat", { numberOfKeys: 1, lua: BEAT_LUA });
    opts.client.defineCommand("agentdPresenceState", { numberOfKeys: 1, lua: STATE_LUA });
    this.#scripts = opts.client as unknown as Scripts;
  }

  #key(workerId: string): string {
    return `${this.#prefix}worker:${workerId}:presence`;
  }

  async beat(workerId: string, ttlMs: number): Promise<void> {
    checkWorkerId(workerId);
    checkTtl(ttlMs);
    await wrapRedis(
      this.#scripts.agentdPresenceBeat(this.#key(workerId), ttlMs, RECORD_KEEP_MS),
      "worker presence (Redis)",
    );
  }

  async stateOf(workerId: string): Promise<PresenceState> {
    checkWorkerId(workerId);
    const s = await wrapRedis(
      this.#scripts.agentdPresenceState(this.#key(workerId)),
      "worker presence (Redis)",
    );
    return s === "alive" || s === "dead" ? s : "unknown";
  }
}
