/**
 * Rebuilds a one-process day ledger (memory-day-usage.ts) at start from the stored runs'
 * `usage.updated` events: what each run used today (UTC) is the growth of its cumulative
 * usage across today's events, so `agentd dev` restarted still knows how much of each
 * tenant's tokensPerDay and costPerDayUsd is spent (the Redis ledger outlives processes).
 *
 * Must never: count a run's usage from before today, or count one step twice.
 */
import type { DayUse, TenantDayLedger } from "./day-usage.ts";
import { utcDay } from "./day-usage.ts";
import type { StoredRuns } from "./stored-runs.ts";

/** What the run used on `day`: the growth of its cumulative usage over that day's events. */
async function runDayUse(src: StoredRuns, runId: string, day: string): Promise<DayUse> {
  const use = { tokens: 0, costMicros: 0 };
  let prev = { tokens: 0, costMicros: 0 };
  for (const le of await src.events(runId)) {
    const e = le.event;
    if (e.payload.case !== "usageUpdated") continue;
    const u = e.payload.value;
    const cur = {
      tokens: Number((u.usage?.inputTokens ?? 0n) + (u.usage?.outputTokens ?? 0n)),
      costMicros: Number(u.costMicros),
    };
    const at = e.ts === undefined ? 0 : Number(e.ts.seconds) * 1000;
    if (utcDay(at) === day) {
      use.tokens += Math.max(0, cur.tokens - prev.tokens);
      use.costMicros += Math.max(0, cur.costMicros - prev.costMicros);
    }
    prev = cur;
  }
  return use;
}

/** Adds today's use of every stored run to its tenant's day; answers the tokens counted. */
export async function rebuildDayUsage(
  ledger: TenantDayLedger,
  src: StoredRuns,
  now: number,
): Promise<number> {
  const day = utcDay(now);
  let tokens = 0;
  for (const runId of src.runIds()) {
    const tenantId = await src.tenantOf(runId);
    if (tenantId === undefined) continue;
    const use = await runDayUse(src, runId, day);
    if (use.tokens <= 0 && use.costMicros <= 0) continue;
    await ledger.add(tenantId, day, use);
    tokens += use.tokens;
  }
  return tokens;
}
