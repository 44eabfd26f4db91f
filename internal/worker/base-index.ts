/**
 * The kernel's index of the run's uploaded workspace (kernel/script-probe.ts BaseIndex):
 * per path its type, and for a file the sha256 of its content and whether it is
 * executable, read as a stream from the store. Only the index is kept: a digest per path,
 * never a file's content, whatever the upload's size.
 *
 * Must never: hold the archive or a file of it in memory, or index what the archive
 * rules refuse (the stored upload was checked at upload; the same rules read it here).
 */
import { createHash } from "node:crypto";
import type { BaseEntry, BaseIndex } from "../kernel/script-probe.ts";
import type { WorkspaceSource } from "../sandbox/port.ts";
import { SANDBOX_EXPORT_LIMITS } from "../sandbox/workspace-archive.ts";
import { readArchiveEntries } from "../sandbox/workspace-stream.ts";

/** The index of `base` (empty for no upload). */
export async function indexBaseArchive(base: WorkspaceSource | undefined): Promise<BaseIndex> {
  const out = new Map<string, BaseEntry>();
  if (base === undefined || base.size === 0) return out;
  for await (const e of readArchiveEntries(base.open(), SANDBOX_EXPORT_LIMITS)) {
    if (e.implicit === true) continue;
    if (e.type === "file") {
      const hash = createHash("sha256");
      for await (const c of e.content) hash.update(c);
      out.set(e.path, {
        type: "file",
        sha256: hash.digest("hex"),
        executable: (e.mode & 0o111) !== 0,
      });
    } else if (e.type === "symlink")
      out.set(e.path, { type: "symlink", linkname: e.linkname ?? "" });
    else out.set(e.path, { type: "directory" });
  }
  return out;
}
