/**
 * Which of the files a command runs (assessment.scripts) the run itself wrote or changed:
 * one exec in the run's container hashes them (resolving symlinks there), and the result is
 * compared with the uploaded workspace. Feeds applyProvenance() (provenance.ts).
 *
 * Fails closed: a path that resolves outside its own place in /workspace, that cannot be
 * read, that cannot be named on a line, or a probe that fails or times out, counts as
 * changed. Must never: run anything of the workspace, or trust a path it could not check.
 */
import { createHash } from "node:crypto";
import type { SandboxHandle } from "../sandbox/port.ts";
import type { WorkspaceFile } from "../sandbox/workspace-archive.ts";

/** What the uploaded workspace held at a path. */
export interface BaseEntry {
  type: "file" | "directory" | "symlink";
  sha256?: string;
  executable?: boolean;
  linkname?: string;
}

export type BaseIndex = ReadonlyMap<string, BaseEntry>;

export function indexWorkspace(files: readonly WorkspaceFile[]): BaseIndex {
  const out = new Map<string, BaseEntry>();
  for (const f of files) {
    if (f.type === "file")
      out.set(f.path, {
        type: "file",
        sha256: createHash("sha256")
          .update(f.data ?? Buffer.alloc(0))
          .digest("hex"),
        executable: (f.mode & 0o111) !== 0,
      });
    else if (f.type === "symlink") out.set(f.path, { type: "symlink", linkname: f.linkname ?? "" });
    else out.set(f.path, { type: "directory" });
  }
  return out;
}

/**
 * One line per path: absent, link TARGET (a symlink: it resolves elsewhere), moved (a parent
 * directory was swapped for a link), dir, file SHA256 x|-, or other. Paths are given as
 * arguments, read as ./PATH so none is taken for an option.
 */
const PROBE_SCRIPT = `cd /workspace 2>/dev/null || exit 3
for f in "$@"; do
  p="./$f"
  if [ ! -e "$p" ] && [ ! -L "$p" ]; then printf 'absent\\t%s\\n' "$f"; continue; fi
  if [ -L "$p" ]; then printf 'link\\t%s\\t%s\\n' "$f" "$(readlink "$p")"; continue; fi
  r=$(readlink -f "$p" 2>/dev/null)
  if [ "$r" != "/workspace/$f" ]; then printf 'moved\\t%s\\n' "$f"; continue; fi
  if [ -d "$p" ]; then printf 'dir\\t%s\\n' "$f"; continue; fi
  if [ -f "$p" ]; then
    s=$(sha256sum "$p" 2>/dev/null) || { printf 'unreadable\\t%s\\n' "$f"; continue; }
    x=-; [ -x "$p" ] && x=x
    printf 'file\\t%s\\t%s\\t%s\\n' "$f" "\${s%% *}" "$x"; continue
  fi
  printf 'other\\t%s\\n' "$f"
done`;

/** The paths among `paths` that differ from `base` (new, changed, deleted, moved, unreadable). */
export async function changedSinceUpload(
  sandbox: SandboxHandle,
  paths: readonly string[],
  base: BaseIndex,
  timeoutMs = 10_000,
): Promise<Set<string>> {
  const wanted = [...new Set(paths)];
  const nameable = wanted.filter((p) => p !== "" && !/[\t\n\r\0]/.test(p));
  const changed = new Set(wanted.filter((p) => !nameable.includes(p)));
  if (nameable.length === 0) return changed;
  let seen: Map<string, string[]>;
  try {
    const r = await sandbox.exec({
      argv: ["sh", "-c", PROBE_SCRIPT, "agentd-probe", ...nameable],
      timeoutMs,
      maxOutputBytes: 64 * 1024 + nameable.length * 512,
    });
    if (r.exitCode !== 0 || r.truncated || r.timedOut) throw new Error("probe failed");
    seen = new Map(
      r.stdout
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => l.split("\t"))
        .map((parts) => [parts[1] ?? "", parts] as [string, string[]]),
    );
  } catch {
    for (const p of nameable) changed.add(p);
    return changed;
  }
  for (const p of nameable) if (!sameAsBase(seen.get(p), base.get(p))) changed.add(p);
  return changed;
}

function sameAsBase(line: string[] | undefined, b: BaseEntry | undefined): boolean {
  const [kind, , a, x] = line ?? [];
  switch (kind) {
    case "absent":
      return b === undefined;
    case "link":
      return b?.type === "symlink" && b.linkname === a;
    case "dir":
      return b?.type === "directory";
    case "file":
      return b?.type === "file" && b.sha256 === a && b.executable === (x === "x");
    default:
      return false; // moved, unreadable, other, or no line at all: fail closed
  }
}
