/**
 * TenantDayLedger in one process (`agentd dev`, tests of one process): the same answers as
 * the Redis ledger, lost at exit. Must never: be shared by processes (each would count alone).
 */
import type { DayLimits, DayUse, TenantDayLedger } from "./day-usage.ts";

export class MemoryDayLedger implements TenantDayLedger {
  #limits = new Map<string, DayLimits>();
  readonly #use = new Map<string, DayUse>();

  async setLimits(limits: ReadonlyMap<string, DayLimits>): Promise<void> {
    this.#limits = new Map(limits);
  }

  async limitsOf(tenantId: string): Promise<DayLimits> {
    return this.#limits.get(tenantId) ?? {};
  }

  async add(tenantId: string, day: string, use: DayUse): Promise<void> {
    const k = `${tenantId}|${day}`;
    const u = this.#use.get(k) ?? { tokens: 0, costMicros: 0 };
    this.#use.set(k, { tokens: u.tokens + use.tokens, costMicros: u.costMicros + use.costMicros });
  }

  async useOf(tenantId: string, day: string): Promise<DayUse> {
    return this.#use.get(`${tenantId}|${day}`) ?? { tokens: 0, costMicros: 0 };
  }
}
