/**
 * Taking a tenant's reference on a stored workspace (lifecycle/port.ts UploadReceiptRefs),
 * for UploadWorkspace (its receipt, until the receipt's TTL) and an inline CreateRun (until
 * its run's events name the blob). A deletion that found the blob unreferenced just before
 * may be removing it: the reference then waits for that removal to end and checks the blob
 * is still there (else ECONFLICT: upload again), so no answer ever names a removed blob.
 *
 * Must never: answer before the reference is held, or answer success for a blob a deletion
 * removed.
 */
import type { ArtifactStore } from "../artifacts/port.ts";
import { AgentdError } from "../errors.ts";
import type { UploadReceiptRefs } from "../lifecycle/port.ts";
import { REMOVING_MARK_MS } from "../lifecycle/redis-upload-receipts.ts";

/** How often a reference waiting for a removal looks again. */
const REMOVING_POLL_MS = 50;

/** Holds `digest` for the tenant until `expiresAt`; throws ECONFLICT when a deletion removed it. */
export async function holdWorkspace(
  receipts: UploadReceiptRefs,
  artifacts: ArtifactStore,
  tenantId: string,
  digest: string,
  expiresAt: number,
  field: string,
): Promise<void> {
  if (!(await receipts.hold(tenantId, digest, expiresAt))) return;
  // A removal's mark lives REMOVING_MARK_MS at most (its process may die): wait that long.
  const until = Date.now() + REMOVING_MARK_MS + 5_000;
  while ((await receipts.removing(digest)) && Date.now() < until)
    await new Promise((r) => setTimeout(r, REMOVING_POLL_MS));
  if ((await artifacts.stat(digest)) === undefined)
    throw new AgentdError(
      "ECONFLICT",
      `${field}: a deletion of the same content removed the stored workspace while it was uploaded; upload it again`,
      { field },
    );
}
