/**
 * The path jail. Every path argument is checked twice: here, before anything runs
 * (relative, no `..`, no NUL, not denied), and again inside the container after symlinks
 * are resolved (the real path must be under /workspace and not denied), so a symlink made
 * by an earlier process.run cannot lead out.
 */
import picomatch from "picomatch";
import { AgentdError, invalid } from "../errors.ts";
import { WORKSPACE } from "../sandbox/port.ts";

const MAX_PATH = 4096;

/**
 * The normalised workspace-relative form of `path`, or EPERMISSION naming the rule broken.
 * "" means the workspace root (allowed only when `allowRoot`).
 */
export function checkPath(
  field: string,
  path: string,
  denyPatterns: readonly string[],
  allowRoot = false,
): string {
  if (typeof path !== "string") throw invalid(field, "must be a string");
  if (path.length > MAX_PATH) throw invalid(field, `is longer than ${MAX_PATH} characters`);
  if (path.includes("\0")) throw deny(field, path, "NUL bytes are not allowed in paths");
  if (path.startsWith("/")) {
    throw deny(
      field,
      path,
      "absolute paths are not allowed; give a path relative to the workspace",
    );
  }
  const parts = path.split("/").filter((p) => p !== "" && p !== ".");
  if (parts.includes("..")) throw deny(field, path, "'..' is not allowed in paths");
  const rel = parts.join("/");
  if (rel === "" && !allowRoot) throw invalid(field, "must name a file in the workspace");
  checkDenied(field, path, rel, denyPatterns);
  return rel;
}

/** Compiled deny patterns (a policy has a handful; the cache is bounded all the same). */
const MATCHERS = new Map<string, (path: string) => boolean>();
const MAX_MATCHERS = 1024;

function matcher(pattern: string): (path: string) => boolean {
  let m = MATCHERS.get(pattern);
  if (m === undefined) {
    if (MATCHERS.size >= MAX_MATCHERS) MATCHERS.clear();
    m = picomatch(pattern, { dot: true });
    MATCHERS.set(pattern, m);
  }
  return m;
}

/** EPERMISSION when `rel` matches a deny pattern. */
export function checkDenied(
  field: string,
  shown: string,
  rel: string,
  denyPatterns: readonly string[],
): void {
  for (const pattern of denyPatterns) {
    if (matcher(pattern)(rel)) {
      throw deny(field, shown, `the path matches the deny pattern ${JSON.stringify(pattern)}`);
    }
  }
}

/** The relative path of an absolute in-container path under /workspace, or EPERMISSION. */
export function relativeToWorkspace(field: string, shown: string, resolved: string): string {
  if (resolved === WORKSPACE) return "";
  if (!resolved.startsWith(`${WORKSPACE}/`)) {
    // Where it leads is not said: a link's target can be a name a program made from a
    // secret (kernel/held-names.ts), and this answer reaches the model.
    throw deny(field, shown, `it resolves outside ${WORKSPACE} (through a link)`);
  }
  return resolved.slice(WORKSPACE.length + 1);
}

function deny(field: string, path: string, why: string): AgentdError {
  return new AgentdError("EPERMISSION", `${field} ${JSON.stringify(path)}: ${why}`, { field });
}

/**
 * Shell: resolves "/workspace/$1" as far as it exists (symlinks followed), appends the
 * components that do not exist yet, and prints the result NUL-terminated.
 * Exit 2: a dangling link or unreadable component; exit 3: resolves outside /workspace.
 * (`realpath` without `--`: busybox's takes no options and would resolve "--" itself; the
 * argument always starts with /workspace, so it cannot be mistaken for an option.)
 */
export const RESOLVE_SH = `t="/workspace/$1"; a="$t"; rest=""
while [ ! -e "$a" ] && [ ! -L "$a" ]; do rest="/\${a##*/}$rest"; a="\${a%/*}"; done
r=$(realpath "$a" 2>/dev/null) || exit 2
p="$r$rest"
case "$p" in /workspace|/workspace/*) ;; *) printf '%s\\0' "$p"; exit 3 ;; esac
printf '%s\\0' "$p"`;
