/**
 * An idempotent CreateRun retry that finds its run still QUEUED makes sure the queue knows
 * it: a run stored by a server that died between appending `run.queued` and enqueuing
 * (servers before RunAdmission, or an embedded log without its queue) would otherwise stay
 * queued forever, and the retry would keep answering that dead run.
 *
 * Enqueue is idempotent per run id in every adapter: a run the queue knows (waiting, ready,
 * claimed, paused, or ended and kept as a tombstone) is left as it is ("duplicate"), so two
 * retries at once, or a retry racing a worker's claim, never start a second driver. The
 * queue's claim also never hands out a run the log says ended.
 *
 * Must never: enqueue a run that is not QUEUED in its log, or fail the retry when the queue
 * cannot be reached (the run is answered as it is; the next retry tries again).
 */
import { type Run, RunState } from "../gen/agentd/v1/run_service_pb.js";
import type { ApiDeps } from "./deps.ts";

/** Enqueues `run` when it is QUEUED and the queue does not know it; true when it did. */
export async function requeueStranded(deps: ApiDeps, run: Run): Promise<boolean> {
  if (deps.queue === undefined || run.state !== RunState.QUEUED) return false;
  try {
    const r = await deps.queue.enqueue({
      runId: run.runId,
      tenantId: run.tenantId,
      sessionId: run.sessionId,
      priority: run.priority,
    });
    return r.outcome === "queued";
  } catch {
    return false;
  }
}
