/**
 * A tenant's runsPerMinute: CreateRuns counted per UTC minute (a fixed window) across
 * every server, and the in-process twin of the Redis counter (redis-run-rate.ts). Must
 * never: count a refused CreateRun (take() gives back what it took when over the limit),
 * or keep a window's count past the next one.
 */

export interface RunRateCounter {
  /**
   * Counts one run of the tenant in the minute `minute` (ms since the epoch / 60000):
   * true when it fits `limit`, false (and nothing counted) when the minute is full.
   */
  take(tenantId: string, minute: number, limit: number): Promise<boolean>;
}

/** The minute window of `ms`, and the ms until the next one begins. */
export function minuteOf(ms: number): { minute: number; retryAfterMs: number } {
  const minute = Math.floor(ms / 60_000);
  return { minute, retryAfterMs: (minute + 1) * 60_000 - ms };
}

export class MemoryRunRate implements RunRateCounter {
  readonly #counts = new Map<string, { minute: number; n: number }>();

  async take(tenantId: string, minute: number, limit: number): Promise<boolean> {
    const c = this.#counts.get(tenantId);
    const n = c !== undefined && c.minute === minute ? c.n : 0;
    if (n >= limit) return false;
    this.#counts.set(tenantId, { minute, n: n + 1 });
    return true;
  }
}
