/**
 * CreateRun's refusal of a tenant whose UTC day is spent (tokensPerDay or costPerDayUsd in
 * the auth file): RESOURCE_EXHAUSTED naming the limit, with a google.rpc.RetryInfo until
 * the next UTC midnight (when the day's count starts again), attached like the per-token
 * rate limit's. Refused rather than queued: a run admitted now could not ask its model
 * before midnight, and a queue of such runs would start all at once then. Must never:
 * refuse a tenant without a daily limit, or a retried CreateRun that names a run already
 * made (the caller checks its idempotency key first).
 */
import { create } from "@bufbuild/protobuf";
import { DurationSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { RetryInfoSchema } from "../gen/google/rpc/error_details_pb.js";
import { type DaySpent, msToNextUtcDay } from "../tenancy/day-usage.ts";

export function daySpentError(spent: DaySpent, now = Date.now()): ConnectError {
  const ms = msToNextUtcDay(now);
  const retryDelay = create(DurationSchema, {
    seconds: BigInt(Math.floor(ms / 1000)),
    nanos: (ms % 1000) * 1_000_000,
  });
  return new ConnectError(
    `${spent.message}: no new run starts until the next UTC day (in ${Math.ceil(ms / 1000)} s)`,
    Code.ResourceExhausted,
    undefined,
    [{ desc: RetryInfoSchema, value: { retryDelay } }],
  );
}
