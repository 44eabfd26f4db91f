/**
 * The diff of two workspace snapshots as a git-style unified diff that `git apply`
 * accepts (jsdiff does the line diff and the formatting). `.git/` is never part of it.
 */
import { formatPatch, type StructuredPatch, structuredPatch } from "diff";
import type { WorkspaceDiff } from "./port.ts";
import type { WorkspaceFile } from "./workspace-archive.ts";

const IGNORED = /^\.git(\/|$)/;

/** True when the content looks binary (a NUL byte in the first 8 KiB, as git decides). */
export function isBinary(data: Buffer): boolean {
  return data.subarray(0, 8000).includes(0);
}

function contentOf(f: WorkspaceFile): Buffer {
  return f.type === "symlink" ? Buffer.from(f.linkname ?? "") : (f.data ?? Buffer.alloc(0));
}

function modeOf(f: WorkspaceFile): string {
  if (f.type === "symlink") return "120000";
  return f.mode & 0o111 ? "100755" : "100644";
}

export function diffWorkspaces(
  before: readonly WorkspaceFile[],
  after: readonly WorkspaceFile[],
): WorkspaceDiff {
  const index = (files: readonly WorkspaceFile[]): Map<string, WorkspaceFile> =>
    new Map(
      files.filter((f) => f.type !== "directory" && !IGNORED.test(f.path)).map((f) => [f.path, f]),
    );
  const a = index(before);
  const b = index(after);
  const paths = [...new Set([...a.keys(), ...b.keys()])].sort();
  const result: WorkspaceDiff = { patch: "", added: [], modified: [], deleted: [], binary: [] };
  const patches: string[] = [];
  for (const path of paths) {
    const old = a.get(path);
    const neu = b.get(path);
    const oldData = old ? contentOf(old) : undefined;
    const newData = neu ? contentOf(neu) : undefined;
    if (old && neu && oldData?.equals(newData as Buffer) && modeOf(old) === modeOf(neu)) continue;
    if (!old) result.added.push(path);
    else if (!neu) result.deleted.push(path);
    else result.modified.push(path);
    if ((oldData && isBinary(oldData)) || (newData && isBinary(newData))) {
      result.binary.push(path);
      patches.push(
        `diff --git a/${path} b/${path}\n${old ? "" : `new file mode ${modeOf(neu as WorkspaceFile)}\n`}${neu ? "" : `deleted file mode ${modeOf(old as WorkspaceFile)}\n`}Binary files ${old ? `a/${path}` : "/dev/null"} and ${neu ? `b/${path}` : "/dev/null"} differ\n`,
      );
      continue;
    }
    const sp: StructuredPatch = structuredPatch(
      old ? `a/${path}` : "/dev/null",
      neu ? `b/${path}` : "/dev/null",
      oldData?.toString("utf8") ?? "",
      newData?.toString("utf8") ?? "",
      undefined,
      undefined,
      { context: 3 },
    );
    sp.isGit = true;
    if (!old) {
      sp.isCreate = true;
      sp.newMode = modeOf(neu as WorkspaceFile);
    } else if (!neu) {
      sp.isDelete = true;
      sp.oldMode = modeOf(old);
    } else if (modeOf(old) !== modeOf(neu)) {
      sp.oldMode = modeOf(old);
      sp.newMode = modeOf(neu);
    }
    patches.push(formatPatch(sp));
  }
  result.patch = patches.join("");
  return result;
}
