/**
 * The expiry of upload receipts (port.ts UploadReceiptRefs): drops the receipts whose time
 * passed — their receipt blob, and the workspace blob when that was its last reference (no
 * run's events and no other receipt name it). Every server runs it with the deletion
 * finisher; two at once never drop one receipt twice (the store pops each once). A tenant
 * purge drops the tenant's receipts at once (dropTenantReceipts).
 *
 * Must never: remove a blob the store did not answer free, or leave a "removing" mark set
 * after the removal (a concurrent upload of the same content waits on it).
 */
import { receiptDigest } from "../artifacts/upload-receipt.ts";
import { type RunDeletionDeps, releaseTenantBlobs } from "./delete-run.ts";

/** How long an UploadWorkspace receipt lets CreateRun name its digest: 24 h by default. */
export const DEFAULT_UPLOAD_RECEIPT_TTL_MS = 24 * 60 * 60 * 1000;

/** What one expiry pass did. */
export interface ReceiptExpiry {
  /** Receipts dropped. */
  expired: number;
  /** Workspace blobs removed (their last reference was a receipt that expired). */
  removedBlobs: number;
}

/** Drops at most `limit` receipts expired at `now`; loop while `expired === limit`. */
export async function expireUploadReceipts(
  deps: RunDeletionDeps,
  now = Date.now(),
  limit = 500,
): Promise<ReceiptExpiry> {
  const expired = await deps.store.receipts.expire(now, limit);
  const free = expired.filter((r) => r.free).map((r) => r.digest);
  let removedBlobs = 0;
  try {
    for (const r of expired) {
      const receipt = receiptDigest(r.tenantId, r.digest);
      for (const store of deps.artifacts) await store.delete?.(receipt);
    }
    for (const d of new Set(free))
      for (const store of deps.artifacts) if (await store.delete?.(d)) removedBlobs++;
    for (const r of expired) await releaseTenantBlobs(deps, r.tenantId, [r.digest]);
  } finally {
    // On an error the marks go anyway (a blob left is a leak, never a loss): an upload
    // waiting on them must not wait out the mark's TTL.
    await deps.store.receipts.removed(free);
  }
  return { expired: expired.length, removedBlobs };
}

/**
 * Drops every upload receipt of a tenant now, whatever its expiry (PurgeTenant): the receipt
 * blobs, and each workspace blob whose last reference it was. Answers the receipts dropped.
 */
export async function dropTenantReceipts(deps: RunDeletionDeps, tenantId: string): Promise<number> {
  const digests = await deps.store.receipts.tenantDigests(tenantId);
  for (const d of digests) {
    await releaseHold(deps, tenantId, d);
    const receipt = receiptDigest(tenantId, d);
    for (const store of deps.artifacts) await store.delete?.(receipt);
    await releaseTenantBlobs(deps, tenantId, [d]);
  }
  return digests.length;
}

/**
 * Drops `holder`'s reference on `digest` now, removing the blob when it was the last one
 * (an inline CreateRun's hold: its run's events name the blob by then, or it failed).
 * Answers whether the blob was removed.
 */
export async function releaseHold(
  deps: RunDeletionDeps,
  holder: string,
  digest: string,
): Promise<boolean> {
  if (!(await deps.store.receipts.release(holder, digest))) return false;
  let removed = false;
  try {
    for (const store of deps.artifacts) if (await store.delete?.(digest)) removed = true;
  } finally {
    await deps.store.receipts.removed([digest]);
  }
  return removed;
}
