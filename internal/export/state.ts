/**
 * What export sinks keep in the event store: a lease per sink (exactly one process delivers
 * a sink at a time when several servers run), the sink's cursor (where delivery resumes after
 * a restart or a takeover: at-least-once), and its dead letters (events given up on after
 * their retries). Writes of a cursor are fenced by the lease: a process that lost its lease
 * can never move the cursor. Two adapters: Redis (redis-export-state.ts) and the embedded
 * log's data directory (file-export-state.ts), one conformance suite.
 */

export interface DeadLetter {
  cursor: string;
  eventId: string;
  type: string;
  runId: string;
  attempts: number;
  /** The last error, as the sink saw it (status code or cause), never a payload. */
  error: string;
  at: string;
}

/** Dead letters kept per sink (the oldest go first). */
export const DEAD_LETTERS_MAX = 10_000;

export interface ExportState {
  /** Takes or renews the sink's lease for `holder`; false when another holder has it. */
  lease(sink: string, holder: string, ttlMs: number): Promise<boolean>;
  /** Gives the lease up if `holder` has it. */
  release(sink: string, holder: string): Promise<void>;
  /** The stored cursor, "" when none. */
  cursor(sink: string): Promise<string>;
  /** Stores the cursor if `holder` still holds the lease; false (nothing written) otherwise. */
  setCursor(sink: string, holder: string, cursor: string): Promise<boolean>;
  /** Keeps an event given up on (bounded: DEAD_LETTERS_MAX per sink). */
  deadLetter(sink: string, letter: DeadLetter): Promise<void>;
  /** The newest dead letters, newest first. */
  deadLetters(sink: string, limit: number): Promise<DeadLetter[]>;
}
