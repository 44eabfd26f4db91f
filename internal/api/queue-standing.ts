/**
 * A queued run's standing, filled into its Run message for GetRun and ListRuns: its place
 * among queued runs and in its session, and what holds it back (hold-reason.ts). A queue that
 * cannot answer fails the read as any store fault does (UNAVAILABLE with an incident id):
 * a standing silently left out would read as "not held". Must never: change the queue.
 */
import { type Run, RunState } from "../gen/agentd/v1/run_service_pb.js";
import type { ApiDeps } from "./deps.ts";
import { holdReason } from "./hold-reason.ts";

export async function addQueueStanding(deps: ApiDeps, run: Run): Promise<void> {
  if (run.state !== RunState.QUEUED || deps.queue === undefined) return;
  const pos = await deps.queue.positionOf(run.runId);
  if (pos === undefined) return;
  // Where it stands: behind the earlier runs of its session, and among all queued runs.
  run.queuePosition = pos.overall;
  run.sessionPosition = pos.session;
  const hold = holdReason(pos.gate, run.tenantId, deps.tenantConcurrency?.(run.tenantId));
  if (hold !== undefined) {
    run.heldBy = hold.heldBy;
    run.heldMessage = hold.heldMessage;
  }
}
