/**
 * CreateRun's per-tenant gate, checked after the idempotency key (a retry gets its run):
 * a tenant whose UTC day is spent (tokensPerDay, costPerDayUsd) or who made runsPerMinute
 * runs this minute is refused with RESOURCE_EXHAUSTED naming the limit and a
 * google.rpc.RetryInfo saying when it frees (the next UTC midnight, the next minute),
 * attached like the per-token API rate limit's. Refused rather than queued: a run admitted
 * past a spent day could not ask its model before midnight, and a client over its rate is
 * told to slow down instead of building a backlog the queue would hide. Must never: refuse
 * a tenant without such a limit, or count a refused run toward its minute.
 */
import { create } from "@bufbuild/protobuf";
import { DurationSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { RetryInfoSchema } from "../gen/google/rpc/error_details_pb.js";
import { type DaySpent, msToNextUtcDay } from "../tenancy/day-usage.ts";
import { minuteOf, type RunRateCounter } from "../tenancy/run-rate.ts";

export interface TenantGateOptions {
  /** The daily limit the tenant spent today, if any. */
  daySpent(tenantId: string): Promise<DaySpent | undefined>;
  /** The tenant's runsPerMinute; undefined: none. */
  runsPerMinute(tenantId: string): number | undefined;
  rate: RunRateCounter;
  now?: () => number;
}

/** The gate: an error to answer, or undefined (and the run counted in its minute). */
export function createTenantGate(
  o: TenantGateOptions,
): (tenantId: string) => Promise<ConnectError | undefined> {
  return async (tenantId) => {
    const now = (o.now ?? Date.now)();
    const spent = await o.daySpent(tenantId);
    if (spent !== undefined)
      return exhausted(
        `${spent.message}: no new run starts until the next UTC day`,
        msToNextUtcDay(now),
      );
    const limit = o.runsPerMinute(tenantId);
    if (limit === undefined) return undefined;
    const { minute, retryAfterMs } = minuteOf(now);
    if (await o.rate.take(tenantId, minute, limit)) return undefined;
    return exhausted(
      `tenant ${tenantId} created its ${limit} runs this minute (tenants.${tenantId}.limits.runsPerMinute)`,
      retryAfterMs,
    );
  };
}

function exhausted(message: string, retryAfterMs: number): ConnectError {
  const ms = Math.max(1, Math.ceil(retryAfterMs));
  const retryDelay = create(DurationSchema, {
    seconds: BigInt(Math.floor(ms / 1000)),
    nanos: (ms % 1000) * 1_000_000,
  });
  return new ConnectError(
    `${message}; retry in ${Math.ceil(ms / 1000)} s`,
    Code.ResourceExhausted,
    undefined,
    [{ desc: RetryInfoSchema, value: { retryDelay } }],
  );
}
