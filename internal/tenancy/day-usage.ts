/**
 * A tenant's model use per UTC day (tokens, cost) counted across every worker, and the
 * daily limits the servers published from the auth file (tokensPerDay, costPerDayUsd) so
 * workers, which have no auth file, enforce the same numbers. The port and the pure checks;
 * redis-day-usage.ts and memory-day-usage.ts store it. Must never: count a step twice
 * (callers add what one step used, once, after it), or say a day is spent when its limit is
 * not set.
 */

/** A tenant's daily limits; absent: none. Cost in micro-USD. */
export interface DayLimits {
  tokensPerDay?: number;
  costPerDayMicros?: number;
  /**
   * Not a daily limit: the tenant's stored artifact bytes (artifact-bytes.ts), published
   * with the day's limits so workers, which have no auth file, enforce it too.
   */
  artifactBytes?: number;
}

export interface DayUse {
  tokens: number;
  costMicros: number;
}

export interface TenantDayLedger {
  /** Replaces the published limits (tenants not named have none). */
  setLimits(limits: ReadonlyMap<string, DayLimits>): Promise<void>;
  limitsOf(tenantId: string): Promise<DayLimits>;
  /** Adds one step's use to the tenant's day (`day`: utcDay()). */
  add(tenantId: string, day: string, use: DayUse): Promise<void>;
  useOf(tenantId: string, day: string): Promise<DayUse>;
}

/** The UTC day of `ms`, "YYYY-MM-DD": the key of a day's use. */
export function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** Ms from `ms` to the next UTC midnight (when a spent day's limit frees again). */
export function msToNextUtcDay(ms: number): number {
  const d = new Date(ms);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1) - ms;
}

/** Which daily limit the use reached, named as the auth file names it, with a sentence. */
export interface DaySpent {
  limit: "tokensPerDay" | "costPerDayUsd";
  code: "ELIMIT_TOKENS" | "ELIMIT_COST";
  message: string;
}

export function daySpent(tenantId: string, limits: DayLimits, use: DayUse): DaySpent | undefined {
  const at = `tenants.${tenantId}.limits`;
  if (limits.tokensPerDay !== undefined && use.tokens >= limits.tokensPerDay)
    return {
      limit: "tokensPerDay",
      code: "ELIMIT_TOKENS",
      message: `tenant ${tenantId} used ${use.tokens} of its ${limits.tokensPerDay} tokens today (${at}.tokensPerDay, UTC day)`,
    };
  if (limits.costPerDayMicros !== undefined && use.costMicros >= limits.costPerDayMicros)
    return {
      limit: "costPerDayUsd",
      code: "ELIMIT_COST",
      message: `tenant ${tenantId} spent ${(use.costMicros / 1e6).toFixed(6)} of its ${(limits.costPerDayMicros / 1e6).toFixed(6)} USD today (${at}.costPerDayUsd, UTC day)`,
    };
  return undefined;
}
