/**
 * Which paths a workspace patch changes, decided from the two scans alone (no content):
 * what differs from the base by mode or blob id, minus untracked paths `.gitignore` ignores
 * (git never ignores a tracked file) and new paths in dependency folders (node_modules,
 * dependency-paths.ts), minus paths that cannot be carried safely, which are
 * reported with the reason. A path left out keeps its base version in the patched tree.
 *
 * Must never let a symlink that leads out of the tree, a name git refuses, or a name or link
 * target holding a secret value into the plan.
 */

import { isDependencyPath } from "./dependency-paths.ts";
import { gitRefusal } from "./git-path-rules.ts";
import { createGitignoreRules } from "./gitignore-rules.ts";
import { confineSymlinks } from "./symlink-confinement.ts";
import type { WorkspaceEntry, WorkspaceScan } from "./workspace-scan.ts";

/** A path left out of the patch, and why. */
export interface Omission {
  /** The path (redacted if its name holds a secret value). */
  path: string;
  reason: string;
}

/** One changed path: its base entry, its current entry (either may be absent). */
export interface Change {
  path: string;
  old?: WorkspaceEntry;
  neu?: WorkspaceEntry;
}

export interface ChangePlan {
  /** The changes the patch carries, in git's path order. */
  changes: Change[];
  omitted: Omission[];
  /** New paths left out because a `.gitignore` ignores them. */
  ignored: number;
}

/** Paths in git's order: by their UTF-8 bytes. */
export function gitOrder(paths: Iterable<string>): string[] {
  return [...paths]
    .map((p) => ({ p, key: Buffer.from(p, "utf8") }))
    .sort((a, b) => Buffer.compare(a.key, b.key))
    .map((x) => x.p);
}

/** Why a changed path cannot be carried, or undefined. */
function refusal(c: Change, redact: (s: string) => string): string | undefined {
  const symlink = c.old?.kind === "symlink" || c.neu?.kind === "symlink";
  const refused = gitRefusal(c.path, symlink);
  if (refused !== undefined) return refused;
  if (redact(c.path) !== c.path) return "its name holds a secret value";
  for (const e of [c.old, c.neu]) {
    if (e?.linkname !== undefined && redact(e.linkname) !== e.linkname)
      return "a symlink whose target holds a secret value";
  }
  return undefined;
}

function linksOf(entries: ReadonlyMap<string, WorkspaceEntry>): Map<string, string> {
  const links = new Map<string, string>();
  for (const [p, e] of entries) if (e.linkname !== undefined) links.set(p, e.linkname);
  return links;
}

/** Leaves out the changed symlinks that would let a link of the patched tree lead out. */
function confine(base: WorkspaceScan, candidates: Change[], omitted: Omission[]): Change[] {
  const baseLinks = linksOf(base.entries);
  const links = new Map(baseLinks);
  const changed = new Set<string>();
  for (const c of candidates) {
    if (c.neu?.linkname !== undefined) {
      links.set(c.path, c.neu.linkname);
      changed.add(c.path);
    } else links.delete(c.path);
  }
  if (changed.size === 0) return candidates;
  const out = confineSymlinks(links, changed, baseLinks);
  for (const [path, reason] of out) omitted.push({ path, reason });
  return candidates.filter((c) => !out.has(c.path));
}

/** The plan of a patch from `base` to `current`. `redact` finds secret values in names. */
export function planChanges(
  base: WorkspaceScan,
  current: WorkspaceScan,
  redact: (s: string) => string,
): ChangePlan {
  const rules = createGitignoreRules(current.gitignores);
  const all = new Set([...base.entries.keys(), ...current.entries.keys(), ...current.unfit.keys()]);
  const omitted: Omission[] = [];
  const candidates: Change[] = [];
  let ignored = 0;
  for (const path of gitOrder(all)) {
    const c: Change = { path, old: base.entries.get(path), neu: current.entries.get(path) };
    if (c.old && c.neu && c.old.mode === c.neu.mode && c.old.id === c.neu.id) continue;
    // Withheld (unfit) before ignored: a held path never counts in `ignored`.
    const unfit = current.unfit.get(path);
    if (unfit === undefined && !c.old && (rules.ignores(path) || isDependencyPath(path))) {
      ignored++;
      continue;
    }
    const reason = unfit ?? refusal(c, redact);
    if (reason !== undefined) omitted.push({ path: redact(path), reason });
    else candidates.push(c);
  }
  const changes = confine(base, candidates, omitted);
  return { changes, omitted, ignored };
}
