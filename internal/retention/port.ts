/**
 * The retention sweeper's ports (sweeper.ts drives them): an index of ended runs by end time
 * (redis-ended-index.ts on the Redis log; the append script keeps it) and the deletion of one
 * run (delete-for-retention.ts wraps the deletion primitive, internal/lifecycle).
 *
 * Must never: list a run that has not ended, or call a run deleted that the primitive refused.
 */

/**
 * What deleting one run for retention came to. "deleted": this call removed it; "gone": it
 * was not there any more (deleted by someone else, or never existed); "live": the primitive's
 * fence refused it (a lease still held, a queue record not ended): try again later.
 */
export type RetentionOutcome = "deleted" | "gone" | "live";

/** Deletes one ended run of `tenantId`; `retentionMs` is the retention that made it due. */
export type DeleteForRetention = (
  tenantId: string,
  runId: string,
  retentionMs: number,
) => Promise<RetentionOutcome>;

/** One step of the one-time scan for runs that ended before the index existed. */
export interface BackfillStep {
  /** Runs looked at in this step. */
  scanned: number;
  /** Ended runs this step added to the index. */
  added: number;
  /** True once the whole keyspace was scanned (then later steps do nothing). */
  done: boolean;
}

export interface EndedRunIndex {
  /** The index's clock (ms since the epoch): the one end times are recorded with. */
  now(): Promise<number>;
  /** Tenants that have (or had) ended runs in the index. */
  tenants(): Promise<string[]>;
  /**
   * Claims at most `limit` runs of the tenant that ended at or before `cutoffMs`, atomically:
   * each gets the index score `requeueScore` (later than `cutoffMs`), so a second sweeper
   * running at the same time never gets the same run, and a sweeper killed before deleting
   * it leaves it to be found due again once the clock passes that score plus the retention.
   */
  claimDue(
    tenantId: string,
    cutoffMs: number,
    requeueScore: number,
    limit: number,
  ): Promise<string[]>;
  /** The run is gone: drop it from the index. */
  remove(tenantId: string, runId: string): Promise<void>;
  /** Next step of the backfill scan, looking at about `count` runs; a no-op once done. */
  backfill(count: number): Promise<BackfillStep>;
  /**
   * Trims the log-wide feed (WatchEvents) of entries older than `beforeMs`, removing at most
   * about `limit` entries; answers how many went.
   */
  trimFeed(beforeMs: number, limit: number): Promise<number>;
}
