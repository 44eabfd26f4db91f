/**
 * The error of an append whose writer has seen more of the run's log than the store now
 * holds: acknowledged events were lost (an AOF cut repaired with redis-check-aof --fix, an
 * `appendfsync everysec` crash, a failover to a lagging replica). Both event-log adapters
 * throw it when the store does not hold the head the writer names (`knownHead`): its head
 * is behind that seq, or another event sits at that seq. Sealing on the older head would
 * hide the loss (the chain would still verify), so the append is refused and nothing is
 * written.
 *
 * Never thrown for a log that merely moved on (others appended: ECONFLICT / a re-seal) or
 * for a stale fence (EFENCED).
 */
import { AgentdError } from "../errors.ts";

/** A head as a writer or the store knows it. */
export interface ChainHead {
  seq: number;
  hash: string;
}

/** An append refused because the stored log lost events (code EREWOUND, DATA_LOSS at the edge). */
export class LogRewoundError extends AgentdError {
  readonly runId: string;
  /** The head the writer had seen (acknowledged or read). */
  readonly expected: ChainHead;
  /** The head the store holds now. */
  readonly stored: ChainHead;

  constructor(runId: string, expected: ChainHead, stored: ChainHead) {
    super(
      "EREWOUND",
      `the stored log of run ${runId} lost events: the writer saw seq ${expected.seq} (${short(expected.hash)}) but the store's head is seq ${stored.seq} (${short(stored.hash)})`,
    );
    this.name = "LogRewoundError";
    this.runId = runId;
    this.expected = { ...expected };
    this.stored = { ...stored };
  }
}

/** True for an append refused because the stored log is behind what its writer saw. */
export function isLogRewound(err: unknown): err is LogRewoundError {
  return err instanceof LogRewoundError;
}

function short(hash: string): string {
  return hash.slice(0, 12);
}
