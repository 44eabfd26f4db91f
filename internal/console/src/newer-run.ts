/**
 * Which of two answers about a run to show: GetRun answers can cross on the wire, and a
 * slow answer to an earlier request must not replace a newer one — the page would show
 * the run as it was before its last event (say, not yet waiting for the approval listed
 * below it), with no later event to correct it. Must never: go back in a run's log.
 */
import type { Run } from "../../gen/agentd/v1/run_service_pb.js";

export function newerRun(prev: Run | undefined, next: Run | undefined): Run | undefined {
  return prev !== undefined && next !== undefined && next.lastSeq < prev.lastSeq ? prev : next;
}
