/**
 * A paused run's workspace, kept as an artifact to restore from: exported from the
 * container, normalised like an upload (owners, set-id bits, devices and hard links do not
 * survive). Must never: hold the workspace whole in memory, or store a secret value.
 */
import type { ArtifactInfo, ArtifactStore } from "../artifacts/port.ts";
import type { RunSecrets } from "../kernel/run-secrets.ts";
import { collect } from "../sandbox/collect.ts";
import type { SandboxHandle } from "../sandbox/port.ts";
import { normaliseWorkspaceArchive, SANDBOX_EXPORT_LIMITS } from "../sandbox/workspace-archive.ts";

export async function snapshotWorkspace(
  store: ArtifactStore,
  box: SandboxHandle,
  _secrets: RunSecrets,
): Promise<ArtifactInfo> {
  const exported = await collect(box.exportWorkspace());
  return store.put(await normaliseWorkspaceArchive(exported, SANDBOX_EXPORT_LIMITS));
}
