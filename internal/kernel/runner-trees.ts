/**
 * The places whose every file a runner may execute without naming it: what npm's PATH
 * addition (node_modules/.bin) resolves to and the packages those bins load (every
 * node_modules tree), Python environments (.venv, venv, .tox, __pypackages__: their bin/,
 * site-packages, sitecustomize.py and .pth files), files runners import from any directory
 * (conftest.py, build.rs of workspace crates, sitecustomize.py, usercustomize.py, *.pth), and
 * the toolchains' caches outside the workspace (/tmp/.cache: Go's module and build caches,
 * cargo's registry sources, Maven's repository, Gradle's home with its init scripts; /cache:
 * cache mounts). A file there that a call other than a runner wrote (`printf … >
 * node_modules/.bin/eslint` in process.run) is a run-written script: provenance.ts asks.
 *
 * Mechanism: one `find` lists every entry with type, size, inode and ctime (a sandbox user
 * cannot set ctime: any write, chmod or rename changes it). The kernel keeps a baseline: the
 * listing taken before the run's first writing call while the run was pristine, refreshed
 * after each setup.run, test.run and lint.run (what a runner itself leaves is the runner's).
 * Without a baseline (a drive that took over a run already written) every entry counts as
 * written: a person is asked once, and the runner's own end sets the baseline.
 *
 * Must never: run anything of the workspace, read file content, or answer "unchanged" when a
 * scan failed.
 */
import type { SandboxHandle } from "../sandbox/port.ts";

/** Path (workspace-relative inside /workspace, else absolute) → "type size inode ctime". */
export type TreeScan = Map<string, string>;

/** Workspace directories whose whole tree a runner may execute. */
export const TREE_DIRS: readonly string[] = [
  "node_modules",
  ".venv",
  "venv",
  ".tox",
  "__pypackages__",
];
/** Files a runner loads from whichever directory they are in. */
export const LOADED_NAMES: readonly string[] = [
  "conftest.py",
  "build.rs",
  "sitecustomize.py",
  "usercustomize.py",
  "*.pth",
];
/** Toolchain caches and cache mounts outside the workspace, scanned whole. */
export const CACHE_ROOTS: readonly string[] = ["/tmp/.cache", "/cache"];

const F = "%y %s %i %C@ %p\\0";

/** Records are NUL-terminated ("type size inode ctime path"), so any name can be told. */
const SCAN_SCRIPT = `cd /workspace 2>/dev/null || exit 3
set -f
m=""
for n in ${TREE_DIRS.map((n) => `'${n}'`).join(" ")}; do m="$m -o -path */$n -o -path */$n/*"; done
for n in ${LOADED_NAMES.map((n) => `'${n}'`).join(" ")}; do m="$m -o -name $n"; done
find /workspace -mindepth 1 \\( -false $m \\) -printf '${F}' || exit 3
for r in ${CACHE_ROOTS.join(" ")}; do
  [ -d "$r" ] || continue
  find "$r" -printf '${F}' || exit 3
done
printf 'END\\0'`;

/** One listing of the runner trees; undefined when unsure (the caller fails closed). */
export async function scanRunnerTrees(
  sandbox: SandboxHandle,
  timeoutMs = 60_000,
): Promise<TreeScan | undefined> {
  try {
    const r = await sandbox.exec({
      argv: ["sh", "-c", SCAN_SCRIPT, "agentd-trees"],
      cwd: "/",
      timeoutMs,
      maxOutputBytes: 64 * 1024 * 1024,
    });
    if (r.exitCode !== 0 || r.truncated || r.timedOut) return undefined;
    return parseTreeScan(r.stdout);
  } catch {
    return undefined;
  }
}

/** The NUL-separated records as a map; undefined unless it ends with END and no path repeats. */
export function parseTreeScan(stdout: string): TreeScan | undefined {
  const records = stdout.split("\0");
  if (records.pop() !== "" || records.pop() !== "END") return undefined;
  const out: TreeScan = new Map();
  for (const rec of records) {
    const m = /^(\S+ \S+ \S+ \S+) (\/.*)$/s.exec(rec);
    if (m === null) return undefined;
    const path = place(m[2] as string);
    // A name that does not decode (two names shown alike) hides nothing: a repeat is unsure.
    if (out.has(path)) return undefined;
    out.set(path, m[1] as string);
  }
  return out;
}

function place(abs: string): string {
  return abs.startsWith("/workspace/") ? abs.slice("/workspace/".length) : abs;
}

/**
 * The entries that differ from `baseline` (new, changed or gone); every entry of `now` when
 * there is no baseline, and ["(the runner trees could not be scanned)"] when `now` is
 * undefined.
 */
export function treeChanges(baseline: TreeScan | undefined, now: TreeScan | undefined): string[] {
  if (now === undefined) return ["(the runner trees could not be scanned)"];
  if (baseline === undefined) return [...now.keys()];
  const out: string[] = [];
  for (const [p, f] of now) if (baseline.get(p) !== f) out.push(p);
  for (const p of baseline.keys()) if (!now.has(p)) out.push(p);
  return out;
}
