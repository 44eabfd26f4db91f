/**
 * RunAdmission: how CreateRun makes a run exist. The run's first event (`run.queued`) and
 * its queue record are written as ONE step: after it, the run is in the log and in the
 * queue, or in neither. So an acknowledged run always starts, whatever process dies when.
 *
 * Two adapters pass one conformance suite (admission-conformance.ts):
 * - redis-run-admission.ts: one Lua script runs the event log's own append body and the
 *   queue's enqueue function (production; any number of servers).
 * - sequential-run-admission.ts: append, then enqueue, in one process whose queue lives in
 *   memory next to an embedded log (`agentd dev`): a crash loses the queue as a whole, and
 *   the next start queues every open run of the log again, so the two still never disagree.
 *
 * Must never: enqueue a run whose first event was refused (the run exists already, or the
 * event is invalid), or leave a stored `run.queued` that no queue record will ever follow.
 */
import type { LoggedEvent } from "../eventlog/event-codec.ts";
import type { AppendRequest } from "../eventlog/port.ts";

export interface AdmitRequest {
  /** The run's first event: `run.queued`, with its tenant (expectedSeq is always 0). */
  first: AppendRequest & { tenantId: string };
  /** The run's priority band, 1 (highest) … 10 (lowest). */
  priority: number;
}

export interface RunAdmission {
  /**
   * Appends `first` as seq 1 and enqueues the run, atomically. Throws ECONFLICT (nothing
   * enqueued) when the run has events already; EVALIDATION when the event or priority is bad.
   * A storage error leaves the outcome unknown: the caller reads the run's head to learn it.
   */
  admit(req: AdmitRequest): Promise<LoggedEvent>;
}
