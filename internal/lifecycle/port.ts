/**
 * The storage side of deleting a run (delete-run.ts drives it): a tombstone written in one
 * atomic step with the check that the run ended and no worker holds it, then the pieces.
 * Two adapters: redis-run-deletion.ts (Redis log, queue and idempotency keys) and
 * file-run-deletion.ts (the embedded log of `agentd dev`, its memory queue and key file).
 *
 * Must never: mark a run that is live (not ended, leased, or still in the queue), forget a
 * tombstone before every piece is gone, or let a marked run be read or appended again.
 */

/** What a deletion records: who, why, when. Never the run's content. */
export interface DeletionRecord {
  /** The principal that asked ("retention" for the sweeper). */
  by: string;
  /** Why, as given (validated by the caller). */
  reason: string;
  /** When the deletion began, ms since the epoch. */
  at: number;
}

/** A run's tombstone: the record plus what the purge needs once the run's meta is gone. */
export interface RunTombstone extends DeletionRecord {
  runId: string;
  tenantId: string;
  sessionId: string;
  /** The run's terminal event type. */
  ended: string;
}

/**
 * The atomic check-and-mark's answer. "live": not deletable, `state` names why (queued,
 * running, paused, waiting_approval, leased by …); "absent": no such run for that tenant;
 * "already": a deletion began before (its tombstone); "marked": this call began it.
 */
export type MarkResult =
  | { kind: "marked"; tombstone: RunTombstone }
  | { kind: "already"; tombstone: RunTombstone }
  | { kind: "absent" }
  | { kind: "live"; state: string };

/** A receipt the expiry sweep dropped: `free` when no run and no receipt references the blob now. */
export interface ExpiredReceipt {
  tenantId: string;
  digest: string;
  free: boolean;
}

/**
 * A tenant's live upload receipt is a reference on the blob, like a run's events naming it
 * (redis-upload-receipts.ts, file-upload-receipts.ts): taken when UploadWorkspace stores
 * the receipt, kept by every CreateRun that uses it until its expiry, dropped by the expiry
 * sweep (expire-receipts.ts). A blob goes only when neither a run nor a receipt names it.
 *
 * A deletion that found a blob unreferenced marks it "removing" until it removed it
 * (`removed`): a reference taken meanwhile (`hold` answers true) must wait that out and
 * then check the blob is still there, since the deletion decided before the reference.
 */
export interface UploadReceiptRefs {
  /**
   * Takes the tenant's reference on `digest` until `expiresAt` (ms; a later expiry of the
   * same receipt is kept). Answers true when a deletion is removing the blob right now.
   */
  hold(tenantId: string, digest: string, expiresAt: number): Promise<boolean>;
  /** Whether a deletion is removing the blob (between its decision and `removed`). */
  removing(digest: string): Promise<boolean>;
  /**
   * When the tenant holds a receipt on `digest` that has not expired at `now`, extends it
   * to at least `until` (so it outlives the CreateRun using it) and answers true.
   */
  renew(tenantId: string, digest: string, now: number, until: number): Promise<boolean>;
  /**
   * Drops a holder's reference now (an inline CreateRun's, once its run's events name the
   * blob or the CreateRun failed). True when the blob is unreferenced now: it is then marked
   * "removing" and the caller removes it, then calls `removed`.
   */
  release(holder: string, digest: string): Promise<boolean>;
  /** Drops at most `limit` receipts expired at `now`, each exactly once across processes. */
  expire(now: number, limit: number): Promise<ExpiredReceipt[]>;
  /** These blobs (found unreferenced) are removed now: their "removing" marks go. */
  removed(digests: readonly string[]): Promise<void>;
  /** The digests the tenant holds receipts on (expired or not, until swept): a purge drops them. */
  tenantDigests(tenantId: string): Promise<string[]>;
}

export interface PurgeOptions {
  /**
   * False: the run's entries in the log-wide feed are left to the feed's own trims (its
   * length cap, retention's time trim) instead of searched for (the retention sweeper's
   * bulk deletions: its `run.deleted` notice names the run anyway). Default true.
   */
  feedEntries?: boolean;
}

export interface RunDeletionStore {
  /** The upload receipts' references, counted with the runs' by releaseArtifacts. */
  readonly receipts: UploadReceiptRefs;
  /**
   * In ONE atomic step: refuses a run that has not ended, whose lease a worker holds or that
   * the queue still holds in a live state; otherwise writes the tombstone and records the
   * run as being deleted, and publishes `notice(tombstone)` (run.deleted) in the log-wide
   * feed — on Redis in the same atomic step. `tenantId` undefined: any tenant (an admin,
   * the sweeper).
   */
  mark(
    runId: string,
    tenantId: string | undefined,
    rec: DeletionRecord,
    notice: (t: RunTombstone) => string,
  ): Promise<MarkResult>;
  /** mark's checks without writing anything ("marked" carries the tombstone it would write, `by` ""). */
  check(runId: string, tenantId: string | undefined): Promise<MarkResult>;
  /** The tombstone of a run whose deletion began (finished or not), if any. */
  tombstone(runId: string): Promise<RunTombstone | undefined>;
  /** Runs whose deletion began and has not finished (oldest first), at most `limit`. */
  pending(limit: number): Promise<string[]>;
  /** Every digest the run's events name (read before purge removes them). */
  digests(runId: string): Promise<string[]>;
  /**
   * Drops the run's references to `digests`; answers those no other run and no upload
   * receipt references now (the blobs that may go), each marked "removing" until
   * `receipts.removed`. Idempotent: calling it again answers the same or fewer.
   */
  releaseArtifacts(runId: string, digests: readonly string[]): Promise<string[]>;
  /**
   * Whether the tenant still references `digest`: one of its runs' events (a run whose
   * deletion released its references no longer counts) or its live receipt. Decides when a
   * blob leaves the tenant's artifactBytes count (tenancy/artifact-bytes.ts).
   */
  tenantReferences(tenantId: string, digest: string): Promise<boolean>;
  /** Turns the run's idempotency key (if any) into a "deleted" marker without the run id. */
  forgetIdempotency(t: RunTombstone): Promise<void>;
  /** Removes the run's stream, meta, lease, queue record and index entries. Idempotent. */
  purge(t: RunTombstone, opts?: PurgeOptions): Promise<void>;
  /** The deletion is complete: the tombstone is kept for `keepMs` more, then expires. */
  finish(t: RunTombstone, keepMs: number): Promise<void>;
}
