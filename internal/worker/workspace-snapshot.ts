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
 * Files the run holds a secret in (kernel/secret-taint.ts) are left out whole, name
 * included (kernel/secret-snapshot.ts): a value the model re-encoded is no form a mask
 * knows. Restored, such a path is absent (its taint ends at the next scan) or stays held.
 * Must never: hold the workspace whole in memory, store a secret value, or store any byte
 * of a path the run holds a secret in.
 */
import type { ArtifactInfo, ArtifactStore } from "../artifacts/port.ts";
import type { NameKey } from "../kernel/held-names.ts";
import type { RunSecrets } from "../kernel/run-secrets.ts";
import { createSecretMask, type SecretMask } from "../kernel/secret-mask.ts";
import { heldEntryFilter } from "../kernel/secret-snapshot.ts";
import type { TaintedFile } from "../kernel/secret-taint.ts";
import type { SandboxHandle } from "../sandbox/port.ts";
import { SANDBOX_EXPORT_LIMITS } from "../sandbox/workspace-rules.ts";
import { type ArchiveEntry, normaliseWorkspaceStream } from "../sandbox/workspace-stream.ts";

/**
 * The workspace of `box` as a snapshot artifact: `secrets`' values masked, every path
 * `taint` holds (the run's, as the log records it) left out.
 */
export async function snapshotWorkspace(
  store: ArtifactStore,
  box: SandboxHandle,
  secrets: RunSecrets,
  taint: ReadonlyMap<string, TaintedFile>,
  key: NameKey | undefined,
  signal?: AbortSignal,
): Promise<ArtifactInfo> {
  const mask = createSecretMask(secrets.values());
  const held = heldEntryFilter(taint, key);
  const limits = { ...SANDBOX_EXPORT_LIMITS, keepHardLinks: true };
  const tar = normaliseWorkspaceStream(box.exportWorkspace(), limits, {
    keepTimes: true,
    // Decided on the name as the sandbox has it, before any masking.
    mapEntry: (e: ArchiveEntry) =>
      held(e) ? undefined : mask === undefined ? e : maskEntry(e, mask),
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
