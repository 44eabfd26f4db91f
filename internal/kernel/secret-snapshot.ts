/**
 * Which entries of a workspace snapshot (a paused run's artifact, worker/workspace-snapshot.ts)
 * the run holds a secret in (secret-taint.ts): those are left out of the snapshot whole —
 * content, metadata, link target and name — because a snapshot is an artifact a reader of
 * the run can fetch, and masking known forms of a value cannot hide one the model encoded.
 * A hard link to an entry left out is left out too (it is the same file).
 *
 * Restored from such a snapshot, a held path is absent: the next scan ends its taint (a
 * removed file holds nothing), or it stays held (a path removed by a secret call, or one no
 * scan could tell about); it is never back with its content and unheld.
 *
 * Must never: keep an entry that is a held path or lies under one, or decide on a name
 * after masking (the taint knows the names as the sandbox has them).
 */
import { heldLookup, type NameKey } from "./held-names.ts";
import type { TaintedFile } from "./secret-taint.ts";

/** What the filter looks at of an archive entry (paths relative to /workspace). */
export interface SnapshotEntry {
  path: string;
  type: string;
  /** A hard link's target (relative, normalised), a symlink's target as written. */
  linkname?: string;
}

/**
 * A filter over a snapshot's entries in archive order: true for an entry to leave out.
 * Stateful (it remembers what it left out, for hard links): one per snapshot.
 */
export function heldEntryFilter(
  taint: ReadonlyMap<string, TaintedFile>,
  key: NameKey | undefined,
): (e: SnapshotEntry) => boolean {
  if (taint.size === 0) return () => false;
  if (key === undefined)
    throw new Error("heldEntryFilter: a run that holds paths needs its name key");
  const lookup = heldLookup(taint, key);
  const dropped = new Set<string>();
  return (e) => {
    const held =
      lookup(`/workspace/${e.path}`) !== undefined ||
      (e.type === "link" && e.linkname !== undefined && dropped.has(e.linkname));
    if (held && (e.type === "file" || e.type === "link")) dropped.add(e.path);
    return held;
  };
}
