/**
 * A paused run's workspace, kept as an artifact to restore from: the container's export
 * streamed through the normaliser (like an upload: owners, set-id bits and devices do not
 * survive) into the artifact store, with every secret value of the run masked (`*`, same
 * length) in file contents, names and link targets. Unlike an upload it keeps each entry's
 * modification time (to the nanosecond from GNU tar, whole seconds from busybox): restored
 * with mtime 0, a same-size edit made before the pause would look as old as the `.pyc` or
 * make target built before it, and tools would run the old code. And it keeps hard links
 * between its files (cargo's target/, a local clone's git objects): dropped, those files
 * would be missing after the restore.
 * No snapshot is taken once a secret-carrying call ran (worker/before-secret.ts): a value
 * the model re-encoded is no form a mask knows, and leaving held files out would tell
 * which files the call touched.
 * Must never: hold the workspace whole in memory, or store a secret value.
 */
import type { ArtifactInfo, ArtifactStore } from "../artifacts/port.ts";
import type { RunSecrets } from "../kernel/run-secrets.ts";
import { createSecretMask, type SecretMask } from "../kernel/secret-mask.ts";
import type { SandboxHandle } from "../sandbox/port.ts";
import { SANDBOX_EXPORT_LIMITS } from "../sandbox/workspace-rules.ts";
import { type ArchiveEntry, normaliseWorkspaceStream } from "../sandbox/workspace-stream.ts";

/** The workspace of `box` as a snapshot artifact, `secrets`' values masked. */
export async function snapshotWorkspace(
  store: ArtifactStore,
  box: SandboxHandle,
  secrets: RunSecrets,
  signal?: AbortSignal,
): Promise<ArtifactInfo> {
  const mask = createSecretMask(secrets.values());
  const limits = { ...SANDBOX_EXPORT_LIMITS, keepHardLinks: true };
  const tar = normaliseWorkspaceStream(box.exportWorkspace(), limits, {
    keepTimes: true,
    mapEntry: (e: ArchiveEntry) => (mask === undefined ? e : maskEntry(e, mask)),
  });
  return store.putStream(tar, signal === undefined ? {} : { signal });
}

function maskEntry(e: ArchiveEntry, mask: SecretMask): ArchiveEntry {
  return {
    ...e,
    path: mask.text(e.path),
    ...(e.linkname === undefined ? {} : { linkname: mask.text(e.linkname) }),
    content: e.type === "file" ? mask.stream(e.content) : e.content,
  };
}
