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
 * A new drive (a resume, a takeover, a new container) has no baseline in memory: when the
 * log shows that no call but a runner's could have written the trees since the last runner
 * ended (or the upload; treesAsLeft), the trees as they are then are the baseline. Else every
 * entry counts as written — a person is asked once, and the runner's own end sets the
 * baseline — except for setup.run, which reinstalls the trees (its end sets the baseline).
 *
 * Must never: run anything of the workspace, read file content, or answer "unchanged" when a
 * scan failed.
 */
import type { Event } from "../gen/agentd/v1/events_pb.js";
import type { SandboxHandle } from "../sandbox/port.ts";
import { RUNNER_TOOLS } from "./runner-files.ts";

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

/** The find expression matching every runner-tree entry (set -f: no globbing of it). */
const MATCH = [
  ...TREE_DIRS.flatMap((n) => [`-path */${n}`, `-path */${n}/*`]),
  ...LOADED_NAMES.map((n) => `-name ${n}`),
].join(" -o ");

/**
 * Without GNU find's -printf (busybox, an injected agent), one record per entry from a shell
 * loop: content digests stand in for size, inode and ctime (slower: a process per file).
 */
const PORTABLE = `for p; do
  if [ -L "$p" ]; then h=$(readlink -- "$p" | sha256sum) || exit 3; printf 'l - - %s %s\\0' "\${h%% *}" "$p"
  elif [ -d "$p" ]; then printf 'd - - - %s\\0' "$p"
  elif [ -f "$p" ]; then h=$(sha256sum < "$p") || exit 3; x=-; [ -x "$p" ] && x=x; printf 'f - %s %s %s\\0' "$x" "\${h%% *}" "$p"
  else printf 'o - - - %s\\0' "$p"; fi
done`;

/** Records are NUL-terminated ("type size inode ctime path"), so any name can be told. */
const SCAN_SCRIPT = `cd /workspace 2>/dev/null || exit 3
set -f
if find /workspace -maxdepth 0 -printf '' >/dev/null 2>&1; then
  find /workspace -mindepth 1 \\( ${MATCH} \\) -printf '${F}' || exit 3
  for r in ${CACHE_ROOTS.join(" ")}; do
    [ -d "$r" ] || continue
    find "$r" -printf '${F}' || exit 3
  done
else
  find /workspace -mindepth 1 \\( ${MATCH} \\) -exec sh -c "$1" sh {} + || exit 3
  for r in ${CACHE_ROOTS.join(" ")}; do
    [ -d "$r" ] || continue
    find "$r" -exec sh -c "$1" sh {} + || exit 3
  done
fi
printf 'END\\0'`;

/** One listing of the runner trees; undefined when unsure (the caller fails closed). */
export async function scanRunnerTrees(
  sandbox: SandboxHandle,
  timeoutMs = 60_000,
): Promise<TreeScan | undefined> {
  try {
    const r = await sandbox.exec({
      argv: ["sh", "-c", SCAN_SCRIPT, "agentd-trees", PORTABLE],
      cwd: "/",
      ...(sandbox.toolEnv === undefined ? {} : { env: { ...sandbox.toolEnv } }),
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

/** Tools that never write. */
const READERS: ReadonlySet<string> = new Set(["repo.read", "repo.search"]);

/** True when a workspace-relative path lies in a runner tree or is a file runners load. */
export function inRunnerTree(path: string): boolean {
  const parts = path.split("/");
  const name = parts.at(-1) ?? "";
  return (
    parts.some((p) => TREE_DIRS.includes(p)) ||
    LOADED_NAMES.some((n) => (n.startsWith("*") ? name.endsWith(n.slice(1)) : name === n))
  );
}

/**
 * True when, by the log, no call other than a runner's could have written the runner trees
 * since the last runner call ended (or since the upload): an exec (process.run) or a tool
 * this does not know started after it, or a repo.patch of a path in a tree, makes it false.
 * A call counts once it started (tool.started), whether or not it finished.
 */
export function treesAsLeft(events: readonly Event[]): boolean {
  const calls = new Map<string, { tool: string; input: string }>();
  let asLeft = true;
  for (const e of events) {
    const p = e.payload;
    if (p.case === "toolCall")
      calls.set(p.value.callId, { tool: p.value.tool, input: p.value.inputJson });
    else if (p.case === "toolStarted") {
      const c = calls.get(p.value.callId);
      if (c === undefined) asLeft = false;
      else if (RUNNER_TOOLS.has(c.tool) || READERS.has(c.tool)) continue;
      else if (c.tool !== "repo.patch" || patchesTree(c.input)) asLeft = false;
    } else if (p.case === "toolResult") {
      if (RUNNER_TOOLS.has(calls.get(p.value.callId)?.tool ?? "")) asLeft = true;
    }
  }
  return asLeft;
}

function patchesTree(inputJson: string): boolean {
  try {
    const path = (JSON.parse(inputJson) as { path?: unknown }).path;
    return typeof path !== "string" || inRunnerTree(path.replace(/^\/workspace\//, ""));
  } catch {
    return true;
  }
}
