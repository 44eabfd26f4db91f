/**
 * EventLog: the port every reader and writer of run events goes through. Two adapters
 * (redis-event-log.ts, file-event-log.ts) pass the same conformance suite (conformance.ts).
 *
 * Guarantees every adapter must keep: seq is gap-free from 1 per run; an appended event is
 * never rewritten, reordered or duplicated; appends carrying a stale fencing token fail
 * with EFENCED and write nothing; follow() delivers every event after its start exactly
 * once, in order. Terminal is terminal: once a run's log holds run.completed, run.failed or
 * run.cancelled, every later append fails with EENDED (RunEndedError) and writes nothing,
 * whoever appends and whatever its fence or expectedSeq say, after a restart too; a batch
 * never holds an event after a terminal one. A rewound log is refused: an append naming a
 * `knownHead` the store does not hold fails with EREWOUND (LogRewoundError) and writes
 * nothing, and a follower whose delivered events the store no longer holds gets EREWOUND.
 */
import type { LoggedEvent, NewEvent } from "./event-codec.ts";

/** An append request. */
export interface AppendRequest extends NewEvent {
  /**
   * Fencing token: the writer's lease epoch on the run. When set, the append fails with
   * EFENCED unless it equals the run's current epoch. Unset: the server's own appends
   * (run.queued, approval.resolved, cancel requests), which need no lease.
   */
  fence?: number;
  /**
   * Compare-and-append: when set, the append fails with ECONFLICT unless the run's last
   * seq is exactly this (0 for a run that does not exist yet). An ended run answers EENDED
   * instead, whatever this says.
   */
  expectedSeq?: number;
  /**
   * The last head the writer saw (acknowledged to it or read by it). When set, the append
   * fails with EREWOUND (LogRewoundError: both heads) and writes nothing unless the stored
   * log holds exactly this event at this seq: a store behind it lost acknowledged events,
   * and sealing on its older head would hide that. A log that moved past it (others
   * appended since) is fine. Checked after EENDED, before the fence and the head.
   */
  knownHead?: { seq: number; hash: string };
  /** Required for seq 1 (run.queued): the run's tenant, for the tenant index. */
  tenantId?: string;
}

/** The head of a run's log plus the metadata the indexes keep. */
export interface RunHead {
  runId: string;
  tenantId: string;
  sessionId: string;
  /** seq of the last event (0 when none). */
  seq: number;
  /** hash of the last event. */
  hash: string;
  /** Current lease epoch (0 when never leased). */
  epoch: number;
  /**
   * Set once the run ended: the type of its terminal event (then `seq` is that event's).
   * Absent while the run is live.
   */
  ended?: string;
}

/** A page of run ids, newest first. */
export interface RunIdPage {
  runIds: string[];
  /** Pass as `before` for the next page; undefined on the last page. */
  next: string | undefined;
}

export interface ListRunIdsQuery {
  tenantId: string;
  /** Only runs of this session. */
  sessionId?: string;
  /** Only runs older than this run id (exclusive): the cursor. */
  before?: string;
  limit: number;
}

/**
 * One applied commit in the log-wide feed: events fromSeq..toSeq of one run. The feed holds
 * every commit of every run in the order the log applied them; WatchEvents and the export
 * sinks read it.
 */
export interface FeedEntry {
  /** Position in the feed: unique and ordered ("ms-n" in Redis, "n" in the file log). */
  id: string;
  runId: string;
  tenantId: string;
  fromSeq: number;
  toSeq: number;
  /**
   * A notice: the entry holds its own event (canonical JSON; run.deleted, tenant.purged),
   * which no run log holds. Its fromSeq and toSeq are 1; its event's seq is 0.
   */
  event?: string;
}

export interface EventLog {
  /** Human-readable adapter name for logs and /readyz ("redis", "file"). */
  readonly kind: string;
  /** Appends one event; resolves with it as stored. */
  append(req: AppendRequest): Promise<LoggedEvent>;
  /** Events with seq > afterSeq, in order, at most `limit` (default: all). */
  read(runId: string, afterSeq: number, limit?: number): Promise<LoggedEvent[]>;
  /**
   * Events with seq > afterSeq: stored ones first, then live ones as they are appended,
   * each exactly once, in order, until `signal` aborts (the iterator then just ends).
   */
  follow(runId: string, afterSeq: number, signal: AbortSignal): AsyncIterable<LoggedEvent>;
  /**
   * follow() in batches of consecutive events: whatever was ready at once (a page of
   * history, the live events that arrived since the last batch), for consumers that write
   * a batch in one go (the StreamEvents fan-out). Same guarantees as follow().
   */
  followBatches(runId: string, afterSeq: number, signal: AbortSignal): AsyncIterable<LoggedEvent[]>;
  /** The run's head, or undefined when the run has no events. */
  head(runId: string): Promise<RunHead | undefined>;
  /**
   * Runs `read` and, when the log acknowledges writes only once replicas hold them
   * (`--redis-min-replicas-acked`), confirms that the replicas hold what it read before
   * returning it: for answers built from a write whose own confirmation failed (a
   * CreateRun retried, a commit recovered from the stored head). Absent: nothing to confirm.
   */
  replicated?<T>(read: () => Promise<T>): Promise<T>;
  /** Heads of many runs at once (undefined where a run does not exist). */
  heads(runIds: readonly string[]): Promise<(RunHead | undefined)[]>;
  /** Increments the run's lease epoch and returns the new value (the new fencing token). */
  bumpEpoch(runId: string): Promise<number>;
  /**
   * The run's name key: 32 random bytes made on first use and kept beside the run's log,
   * never in an event, so no API reader (StreamEvents, WatchEvents, exports) can get it.
   * The kernel keys the names of paths a secret-carrying call made with it
   * (kernel/held-names.ts); every worker that drives the run gets the same bytes.
   */
  runNameKey(runId: string): Promise<Uint8Array>;
  /** A tenant's run ids, newest first (ids are ULIDs, so newest = greatest). */
  listRunIds(query: ListRunIdsQuery): Promise<RunIdPage>;
  /**
   * The feed from the entry `from` (inclusive; "" = the oldest kept), at most `limit`
   * entries. The feed keeps the newest ~FEED_MAX_LEN entries (Redis) or all (file).
   */
  readFeed(from: string, limit: number): Promise<FeedEntry[]>;
  /** The newest feed entry's id; "" while the feed is empty. */
  feedHead(): Promise<string>;
  /**
   * Adds a notice to the log-wide feed: an event held by the feed entry itself, for what
   * has no run log to be in (a deleted run's `run.deleted`, a tenant's `tenant.purged`).
   */
  publish(tenantId: string, runId: string, json: string): Promise<void>;
  /** Resolves when the log is reachable; throws EUNAVAILABLE otherwise. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
