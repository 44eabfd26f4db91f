/**
 * Taking a reference on a stored blob (port.ts UploadReceiptRefs) after storing it: for
 * UploadWorkspace (the tenant's receipt, until its TTL), an inline CreateRun and a run's own
 * writes (until its events name the blob: held-artifact-store.ts). A deletion that found
 * the blob unreferenced before the reference may be removing it, or may have removed it
 * already: the reference waits for a removal under way to end, then checks the blob is
 * still there (else ECONFLICT: store it again), so no answer ever names a removed blob.
 *
 * Must never: answer before the reference is held, or answer success for a blob a deletion
 * removed.
 */
import type { ArtifactStore } from "../artifacts/port.ts";
import { AgentdError } from "../errors.ts";
import type { UploadReceiptRefs } from "./port.ts";
import { REMOVING_MARK_MS } from "./redis-upload-receipts.ts";

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
  if (await receipts.hold(tenantId, digest, expiresAt)) {
    // A removal's mark lives REMOVING_MARK_MS at most (its process may die): wait that long.
    const until = Date.now() + REMOVING_MARK_MS + 5_000;
    while ((await receipts.removing(digest)) && Date.now() < until)
      await new Promise((r) => setTimeout(r, REMOVING_POLL_MS));
  }
  // Checked even without a mark: a deletion that decided before the hold may have ended
  // (mark gone) after removing the blob this call had just stored.
  if ((await artifacts.stat(digest)) === undefined)
    throw new AgentdError(
      "ECONFLICT",
      `${field}: a deletion of the same content removed the stored workspace while it was uploaded; upload it again`,
      { field },
    );
}
