/**
 * A tenant's stored artifact bytes (the auth file's `limits.artifactBytes`): the sizes of the
 * distinct blobs the tenant references — a blob counted once per tenant however many of its
 * runs name it, and once for each tenant that references it. Charged when a blob is stored
 * for the tenant (its runs' artifacts and snapshots, its uploads); released when the tenant's
 * last reference to a blob goes (a run deleted, a receipt expired: internal/lifecycle). The
 * port and the pure check; redis-artifact-bytes.ts and memory-artifact-bytes.ts store it.
 *
 * Must never: count one blob twice for one tenant, or release a blob the tenant still
 * references (the caller checks that).
 */

export interface TenantArtifactLedger {
  /** Counts the blob for the tenant (a no-op when counted already); answers its bytes after. */
  charge(tenantId: string, digest: string, size: number): Promise<number>;
  /** Uncounts the blob for the tenant (a no-op when not counted). */
  release(tenantId: string, digest: string): Promise<void>;
  /** The tenant's stored bytes now. */
  bytesOf(tenantId: string): Promise<number>;
}

/** The message of a run failed by the limit (code ELIMIT_ARTIFACTS). */
export function artifactBytesOver(tenantId: string, used: number, limit: number): string {
  return `tenant limit artifactBytes: tenant ${tenantId} stores ${used} of its ${limit} artifact bytes (tenants.${tenantId}.limits.artifactBytes); delete runs or raise the limit`;
}
