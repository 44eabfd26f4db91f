/**
 * The one rule for putting a paused run back on the queue: only when it waits for nothing
 * any more (its approval is resolved). Used by ResolveApproval and the approval sweep (the
 * API) and by a worker that released a run whose approval was resolved while it paused it.
 */
import { type Run, RunState } from "../gen/agentd/v1/run_service_pb.js";
import type { RunQueue } from "./port.ts";

/** Enqueues `run` if it is paused with its approval resolved; true when that made it claimable again. */
export async function resumeIfResolved(queue: RunQueue, run: Run): Promise<boolean> {
  if (run.state !== RunState.PAUSED || run.pendingApprovalId !== "") return false;
  const r = await queue.enqueue({
    runId: run.runId,
    tenantId: run.tenantId,
    sessionId: run.sessionId,
    priority: run.priority,
  });
  return r.outcome === "resumed";
}
