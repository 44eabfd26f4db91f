/**
 * TenantDayLedger on Redis, shared by every server and worker:
 *
 *   tenant-day-limits            hash  tenant -> JSON {tokensPerDay?, costPerDayMicros?}
 *   tenant:{t}:day:{YYYY-MM-DD}  hash  fields tokens, cost (micro-USD); expires 3 days after
 *                                      its last write (a day's use is read only that day)
 *
 * Must never: keep use in process memory (workers add from everywhere), or let a day's key
 * live forever. After a Redis restart without persistence the day's use restarts at 0 (with
 * AOF, as agentd's deployments run it, it survives); that is the documented trade-off.
 */
import type { Redis } from "ioredis";
import { wrapRedis } from "../eventlog/redis-error.ts";
import type { DayLimits, DayUse, TenantDayLedger } from "./day-usage.ts";

const DAY_KEY_TTL_S = 3 * 24 * 3600;

export class RedisDayLedger implements TenantDayLedger {
  readonly #client: Redis;
  readonly #prefix: string;

  constructor(opts: { client: Redis; prefix?: string }) {
    this.#client = opts.client;
    this.#prefix = opts.prefix ?? "agentd:";
  }

  get #limitsKey(): string {
    return `${this.#prefix}tenant-day-limits`;
  }

  #dayKey(tenantId: string, day: string): string {
    return `${this.#prefix}tenant:${tenantId}:day:${day}`;
  }

  async setLimits(limits: ReadonlyMap<string, DayLimits>): Promise<void> {
    const m = this.#client.multi().del(this.#limitsKey);
    for (const [t, l] of limits) m.hset(this.#limitsKey, t, JSON.stringify(l));
    await wrapRedis(m.exec());
  }

  async limitsOf(tenantId: string): Promise<DayLimits> {
    const v = await wrapRedis(this.#client.hget(this.#limitsKey, tenantId));
    if (v === null) return {};
    try {
      return JSON.parse(v) as DayLimits;
    } catch {
      return {}; // not ours to judge: the next publish replaces it
    }
  }

  async add(tenantId: string, day: string, use: DayUse): Promise<void> {
    const k = this.#dayKey(tenantId, day);
    await wrapRedis(
      this.#client
        .multi()
        .hincrby(k, "tokens", Math.max(0, Math.round(use.tokens)))
        .hincrby(k, "cost", Math.max(0, Math.round(use.costMicros)))
        .expire(k, DAY_KEY_TTL_S)
        .exec(),
    );
  }

  async useOf(tenantId: string, day: string): Promise<DayUse> {
    const [t, c] = await wrapRedis(
      this.#client.hmget(this.#dayKey(tenantId, day), "tokens", "cost"),
    );
    return { tokens: Number(t ?? 0), costMicros: Number(c ?? 0) };
  }
}
