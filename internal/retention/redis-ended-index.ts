/**
 * EndedRunIndex on the Redis event log. The append script records each run in
 * `retention:ended:{tenant}` (score: end time, ms, Redis's clock) when its terminal event
 * lands, and the tenant in `retention:tenants` (eventlog/append-lua.ts). Runs that ended
 * before that existed are found once by `backfill`: a SCAN over run metas whose cursor is
 * kept in Redis, so any process continues where another stopped and it ends for good.
 *
 * Must never: index a run that has not ended (the backfill checks the last event like the
 * append script's run_ended), or move a run's score earlier than it is (ZADD GT / NX).
 */
import type { Redis } from "ioredis";
import { TERMINAL_TYPES } from "../eventlog/event-codec.ts";
import { wrapRedis } from "../eventlog/redis-error.ts";
import { type LogKeys, logKeys } from "../eventlog/redis-log-keys.ts";
import type { BackfillStep, EndedRunIndex } from "./port.ts";

/**
 * KEYS[1]: the tenant's index. ARGV: cutoff ms, requeue score, limit.
 * Claims the due runs by moving them to the requeue score in the same step.
 */
const CLAIM_LUA = `local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(ids) do redis.call('ZADD', KEYS[1], ARGV[2], id) end
return ids`;

type ScriptClient = { agentdRetentionClaim(key: string, ...args: string[]): Promise<string[]> };

export class RedisEndedRunIndex implements EndedRunIndex {
  readonly #client: Redis;
  readonly #prefix: string;
  readonly #keys: LogKeys;

  constructor(opts: { client: Redis; prefix?: string }) {
    this.#client = opts.client;
    this.#prefix = opts.prefix ?? "agentd:";
    this.#keys = logKeys(this.#prefix);
    opts.client.defineCommand("agentdRetentionClaim", { numberOfKeys: 1, lua: CLAIM_LUA });
  }

  async now(): Promise<number> {
    const [s, us] = await wrapRedis(this.#client.time());
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  }

  tenants(): Promise<string[]> {
    return wrapRedis(this.#client.smembers(this.#keys.retentionTenants));
  }

  claimDue(tenantId: string, cutoffMs: number, requeueScore: number, limit: number) {
    const scripts = this.#client as unknown as ScriptClient;
    return wrapRedis(
      scripts.agentdRetentionClaim(
        this.#keys.endedRuns(tenantId),
        String(cutoffMs),
        String(requeueScore),
        String(limit),
      ),
    );
  }

  async remove(tenantId: string, runId: string): Promise<void> {
    await wrapRedis(this.#client.zrem(this.#keys.endedRuns(tenantId), runId));
  }

  async backfill(count: number): Promise<BackfillStep> {
    const key = this.#keys.retentionBackfill;
    const [cursor, done] = await wrapRedis(this.#client.hmget(key, "cursor", "done"));
    if (done === "1") return { scanned: 0, added: 0, done: true };
    const [next, metas] = await wrapRedis(
      this.#client.scan(cursor ?? "0", "MATCH", `${this.#prefix}run:*:meta`, "COUNT", count),
    );
    let added = 0;
    for (const meta of metas) if (await this.#indexIfEnded(meta)) added++;
    // Several processes may step at once: each step is idempotent (ZADD NX), and a cursor
    // written back by a slower one only repeats a stretch of the scan.
    await wrapRedis(
      next === "0"
        ? this.#client.hset(key, "cursor", "0", "done", "1")
        : this.#client.hset(key, "cursor", next),
    );
    return { scanned: metas.length, added, done: next === "0" };
  }

  /** Adds the run of `meta` to its tenant's index when it ended (NX: never moves a score). */
  async #indexIfEnded(meta: string): Promise<boolean> {
    const runId = meta.slice(`${this.#prefix}run:`.length, -":meta".length);
    const [tenant, ended] = await wrapRedis(this.#client.hmget(meta, "tenant", "ended"));
    if (!tenant || ended === "") return false;
    const last = await wrapRedis(
      this.#client.xrevrange(this.#keys.stream(runId), "+", "-", "COUNT", 1),
    );
    const json = last[0]?.[1]?.[1];
    if (json === undefined) return false;
    const event = parseLast(json);
    if (event === undefined || !TERMINAL_TYPES.has(event.type)) return false;
    const added = await wrapRedis(
      this.#client
        .multi()
        .zadd(this.#keys.endedRuns(tenant), "NX", event.ts, runId)
        .sadd(this.#keys.retentionTenants, tenant)
        .exec(),
    );
    return Number(added?.[0]?.[1]) === 1;
  }

  async trimFeed(beforeMs: number, limit: number): Promise<number> {
    // MINID ~ with LIMIT: whole radix-tree nodes only, at most `limit` entries per call, so
    // one sweep never blocks Redis on a feed of millions of entries.
    const n = await wrapRedis(
      this.#client.call(
        "XTRIM",
        this.#keys.feed,
        "MINID",
        "~",
        String(beforeMs),
        "LIMIT",
        String(limit),
      ),
    );
    return Number(n);
  }
}

/** The type and time (ms) of a stored event, or undefined when it does not parse. */
function parseLast(json: string): { type: string; ts: number } | undefined {
  try {
    const e = JSON.parse(json) as { type?: unknown; ts?: unknown };
    const ts = typeof e.ts === "string" ? Date.parse(e.ts) : Number.NaN;
    if (typeof e.type !== "string" || !Number.isFinite(ts)) return undefined;
    return { type: e.type, ts };
  } catch {
    return undefined;
  }
}
