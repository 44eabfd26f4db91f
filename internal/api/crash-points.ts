/**
 * The named points of CreateRun where a fault-injection test may stop the server (test
 * builds set AGENTD_TEST_CRASH_AT, read by cmd/agentd only). The handler calls
 * `deps.crashPoint?.(name)` at each; production wiring passes nothing, so these are no-ops.
 *
 * - createRun.afterClaim: the idempotency key is claimed for a new run id; nothing else is written.
 * - createRun.afterAppend: (only without a RunAdmission) run.queued is stored, not yet enqueued.
 * - createRun.afterAdmit: the run is in the log and the queue; the client has no answer yet.
 */
export const CREATE_RUN_CRASH_POINTS = [
  "createRun.afterClaim",
  "createRun.afterAppend",
  "createRun.afterAdmit",
] as const;

export type CreateRunCrashPoint = (typeof CREATE_RUN_CRASH_POINTS)[number];
