/**
 * The error of an append to a run that already ended: both event-log adapters throw it for
 * every append after run.completed, run.failed or run.cancelled, whoever the writer is
 * (fenced worker or unfenced server) and whatever its expectedSeq. It wins over EFENCED and
 * ECONFLICT: an ended run is the more final fact, and retrying can never help.
 *
 * Never thrown for anything but a terminal event already stored in the log.
 */
import { AgentdError } from "../errors.ts";

/** An append refused because the run ended (code EENDED, FAILED_PRECONDITION at the edge). */
export class RunEndedError extends AgentdError {
  readonly runId: string;
  /** The terminal event's type: "run.completed", "run.failed" or "run.cancelled". */
  readonly endedBy: string;
  /** seq of the terminal event (the run's last seq, for good). */
  readonly endSeq: number;

  constructor(runId: string, endedBy: string, endSeq: number) {
    super(
      "EENDED",
      `run ${runId} already ended (${endedBy} at seq ${endSeq}): nothing can be appended after it`,
    );
    this.name = "RunEndedError";
    this.runId = runId;
    this.endedBy = endedBy;
    this.endSeq = endSeq;
  }
}

/** True for an append refused because its run ended. */
export function isRunEnded(err: unknown): err is RunEndedError {
  return err instanceof RunEndedError;
}
