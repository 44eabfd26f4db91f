/**
 * Rebuilds a one-process artifactBytes ledger (memory-artifact-bytes.ts) at start from what
 * the store holds — every stored run's named blobs charged to its tenant, every upload
 * receipt's blob to its holder — so `agentd dev` restarted counts what it counted before
 * (the Redis ledger outlives its processes and needs none of this).
 *
 * Must never: charge a blob the artifact store no longer holds, or a deleted run's blobs.
 */
import type { ArtifactStore } from "../artifacts/port.ts";
import type { TenantArtifactLedger } from "./artifact-bytes.ts";
import type { StoredRuns } from "./stored-runs.ts";

/** Charges the ledger with what `src` references; answers the blobs charged. */
export async function rebuildArtifactBytes(
  ledger: TenantArtifactLedger,
  src: StoredRuns,
  artifacts: ArtifactStore,
): Promise<number> {
  const charge = async (tenantId: string, digest: string): Promise<number> => {
    const info = await artifacts.stat(digest);
    if (info === undefined) return 0;
    await ledger.charge(tenantId, digest, info.size);
    return 1;
  };
  let n = 0;
  for (const runId of src.runIds()) {
    const tenantId = await src.tenantOf(runId);
    if (tenantId === undefined) continue;
    for (const d of await src.digests(runId)) n += await charge(tenantId, d);
  }
  for (const [tenantId, digest] of src.receipts()) n += await charge(tenantId, digest);
  return n;
}
