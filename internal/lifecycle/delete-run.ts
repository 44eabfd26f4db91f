/**
 * Deleting one run: everything it owns goes — its event stream, meta and index entries
 * (ListRuns, the session index, the approvals and run projections built from them), its
 * idempotency key, queue record and lease, the artifacts and workspace snapshots no other
 * run and no live upload receipt references (port.ts UploadReceiptRefs: another tenant's
 * upload of the same content keeps the blob until its receipt expires), and the cached fold.
 *
 * Order (crash-safe, idempotent): a precheck for a clear error, the `beforeDelete` hook (the
 * archive: it reads the run while it is still whole), then the tombstone — in one atomic
 * step with the check that the run ended and no worker holds it (RunDeletionStore.mark) —
 * then the pieces, then `finish`. A process killed after the tombstone leaves the run in
 * `pending()`: any later call for it, or `finishPending` (every server at start and
 * periodically), completes it without calling the hook again. From the tombstone on, the run
 * is NOT_FOUND to every reader and no append to it is taken (the log checks the tombstone
 * in its own atomic step), so a deleted id never comes back.
 *
 * Must never: touch a live run (queued, running, paused, waiting for approval, leased);
 * remove anything before `beforeDelete` succeeded; remove a blob another run or a live upload
 * receipt references.
 */
import type { ArtifactStore } from "../artifacts/port.ts";
import { receiptDigest } from "../artifacts/upload-receipt.ts";
import { AgentdError } from "../errors.ts";
import type { TenantArtifactLedger } from "../tenancy/artifact-bytes.ts";
import { runHolder } from "./held-artifact-store.ts";
import { runDeletedNotice } from "./notices.ts";
import type { DeletionRecord, RunDeletionStore, RunTombstone } from "./port.ts";

/** How long a finished deletion's tombstone is kept (it refuses stragglers' appends): 7 days. */
export const TOMBSTONE_KEEP_MS = 7 * 24 * 60 * 60 * 1000;

/**
 * Where a fault-injection test may stop the deleting process (AGENTD_TEST_CRASH_AT, read by
 * cmd/agentd only): after the tombstone, and after the artifacts went but before the log's
 * keys. Production wiring passes no hook.
 */
export const DELETE_RUN_CRASH_POINTS = ["deleteRun.afterMark", "deleteRun.afterArtifacts"] as const;
export type DeleteRunCrashPoint = (typeof DELETE_RUN_CRASH_POINTS)[number];

export interface RunDeletionDeps {
  store: RunDeletionStore;
  /**
   * False: the run's feed entries are left to the feed's trims (the retention sweeper:
   * thousands of deletions an hour, each otherwise searching up to 5,000 feed entries).
   */
  dropFeedEntries?: boolean;
  /** Every artifact store the run's blobs may be in (the server's; more are allowed). */
  artifacts: readonly ArtifactStore[];
  /** Drops a run's cached fold in this process (RunProjectionCache.drop). */
  dropCached?: (runId: string) => void;
  /**
   * The tenants' stored artifact bytes (artifactBytes): a blob leaves the tenant's count
   * when its last reference of the tenant goes. Absent: nothing is counted.
   */
  tenantArtifacts?: TenantArtifactLedger;
  /** Default TOMBSTONE_KEEP_MS. */
  tombstoneKeepMs?: number;
  /** Test builds only: called at each named point (DELETE_RUN_CRASH_POINTS). */
  crashPoint?: (point: DeleteRunCrashPoint) => void;
}

export interface DeleteRunRequest {
  runId: string;
  /** Only a run of this tenant (others: ENOTFOUND); undefined: any tenant (admin, sweeper). */
  tenantId?: string;
  /** Who asks (a principal's name, "retention"). */
  by: string;
  /** Why (validated by the caller: bounded, no control characters). */
  reason: string;
}

export interface DeleteRunOptions {
  /**
   * Called once, before anything is removed, while the run is still whole and readable
   * (the archive plugs in here). A throw stops the deletion: nothing is removed.
   */
  beforeDelete?: (tenantId: string, runId: string) => Promise<void>;
  /** The time of the record; default Date.now(). */
  now?: number;
}

export interface DeletedRun {
  tombstone: RunTombstone;
  /** False when an earlier call had begun (or finished) this deletion. */
  began: boolean;
  /** Blobs removed from the stores by this call. */
  removedBlobs: number;
}

/**
 * Deletes a run that has ended. Throws ENOTFOUND (no such run for the tenant),
 * ECONFLICT naming the run's state when it is live ("cancel it first"), or the hook's error.
 */
export async function deleteRun(
  deps: RunDeletionDeps,
  req: DeleteRunRequest,
  opts: DeleteRunOptions = {},
): Promise<DeletedRun> {
  const prior = await deps.store.tombstone(req.runId);
  if (prior !== undefined) {
    if (req.tenantId !== undefined && prior.tenantId !== req.tenantId) throw notFound(req.runId);
    return { tombstone: prior, began: false, removedBlobs: await complete(deps, prior) };
  }
  const rec: DeletionRecord = { by: req.by, reason: req.reason, at: opts.now ?? Date.now() };
  // A check first, for the hook: it (an archive) is never run for a live or absent run.
  const probe = await deps.store.check(req.runId, req.tenantId);
  refuse(req.runId, probe);
  if (probe.kind === "already") return finishAlready(deps, req, probe.tombstone);
  await opts.beforeDelete?.(probe.tombstone.tenantId, req.runId);
  const marked = await deps.store.mark(req.runId, req.tenantId, rec, runDeletedNotice);
  refuse(req.runId, marked);
  deps.crashPoint?.("deleteRun.afterMark");
  if (marked.kind === "already") return finishAlready(deps, req, marked.tombstone);
  return {
    tombstone: marked.tombstone,
    began: true,
    removedBlobs: await complete(deps, marked.tombstone),
  };
}

async function finishAlready(
  deps: RunDeletionDeps,
  req: DeleteRunRequest,
  t: RunTombstone,
): Promise<DeletedRun> {
  if (req.tenantId !== undefined && t.tenantId !== req.tenantId) throw notFound(req.runId);
  return { tombstone: t, began: false, removedBlobs: await complete(deps, t) };
}

function refuse(
  runId: string,
  r: Awaited<ReturnType<RunDeletionStore["mark"]>>,
): asserts r is Extract<typeof r, { kind: "marked" | "already" }> {
  if (r.kind === "absent") throw notFound(runId);
  if (r.kind === "live")
    throw new AgentdError(
      "ECONFLICT",
      `run ${runId} is ${r.state}: only an ended run can be deleted; cancel it first`,
      { field: "run_id" },
    );
}

const notFound = (runId: string): AgentdError =>
  new AgentdError("ENOTFOUND", `run ${runId} not found`, { field: "run_id" });

/** Removes every piece of a marked run, then finishes it. Returns the blobs removed. */
async function complete(deps: RunDeletionDeps, t: RunTombstone): Promise<number> {
  const digests = await deps.store.digests(t.runId);
  await deps.store.forgetIdempotency(t);
  // The run's own write holds (held-artifact-store.ts) go first: it has ended.
  const freedByHold: string[] = [];
  for (const d of digests)
    if (await deps.store.receipts.release(runHolder(t.runId), d)) freedByHold.push(d);
  const released = await deps.store.releaseArtifacts(t.runId, digests);
  const unreferenced = [...new Set([...released, ...freedByHold])];
  let removed = 0;
  for (const d of unreferenced) {
    for (const store of deps.artifacts) {
      if (store.delete === undefined) continue;
      if (await store.delete(d)) removed++;
    }
  }
  // A receipt blob left for a workspace that is gone (no live receipt references it, or it
  // would not be unreferenced): without its blob it names nothing.
  for (const d of unreferenced) {
    const receipt = receiptDigest(t.tenantId, d);
    for (const store of deps.artifacts) await store.delete?.(receipt);
  }
  await deps.store.receipts.removed(unreferenced);
  await releaseTenantBlobs(deps, t.tenantId, digests);
  deps.crashPoint?.("deleteRun.afterArtifacts");
  await deps.store.purge(t, { feedEntries: deps.dropFeedEntries !== false });
  deps.dropCached?.(t.runId);
  await deps.store.finish(t, deps.tombstoneKeepMs ?? TOMBSTONE_KEEP_MS);
  return removed;
}

/** Takes the blobs the tenant no longer references out of its artifactBytes count. */
export async function releaseTenantBlobs(
  deps: RunDeletionDeps,
  tenantId: string,
  digests: readonly string[],
): Promise<void> {
  const ledger = deps.tenantArtifacts;
  if (ledger === undefined) return;
  for (const d of digests)
    if (!(await deps.store.tenantReferences(tenantId, d))) await ledger.release(tenantId, d);
}

/**
 * Completes every deletion a killed process left half done (oldest first, at most `limit`).
 * Any server may call it; two at once do the same idempotent steps. Returns how many.
 */
export async function finishPending(deps: RunDeletionDeps, limit = 100): Promise<number> {
  let n = 0;
  for (const runId of await deps.store.pending(limit)) {
    const t = await deps.store.tombstone(runId);
    if (t === undefined) continue;
    await complete(deps, t);
    n++;
  }
  return n;
}
