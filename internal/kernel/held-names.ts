/**
 * Held records: what of a secret-carrying call's writes the log may record, and how.
 *
 * A program that holds a secret can spell it in anything it decides: the NAME of a path it
 * makes (`touch "/tmp/$(printf %s "$ENV.T" | rev)"`), the metadata a digest covers (nine
 * mode bits per directory), WHICH existing files it changes or removes (one bit per file
 * of the repository), HOW MANY names it makes in each directory, which of its writes are
 * removals, and which of them share a content. So the record's shape must not follow the
 * value: every path of a `secret.written` record (one that existed before the call too) is
 * `ROOT//KEYID.MAC`, where ROOT is the writable root it lies under (`/workspace`, `/tmp`,
 * `/cache`, `/dev/shm`, or "" for any other path: the kernel's choice, not the program's)
 * and MAC the HMAC-SHA256 of the path under the run's name key (EventLog.runNameKey: kept
 * beside the run's log, never in an event, never served by the API); every digest is
 * `h:MAC(call, pathMAC, digest)` (bound to its call and path, so equal contents, removals,
 * new files and records held whole look alike, and no record joins another); and every
 * root gets exactly RECORDS_PER_ROOT records per call, real ones and random ones of the
 * same form, whether the call wrote there or not: the record's shape tells nothing the
 * program chose. Past that many paths under a root, each top-level entry it wrote under
 * (`/workspace/node_modules`) is held whole by its keyed name; past that many of those, the
 * root itself (held whole: only the path's removal ends such a hold, never "as before").
 * Checks hash the candidate path and each of its ancestors (heldLookup); the scans that
 * end a hold hash the paths under a root that has records. Keying matters: an unkeyed hash
 * of a one-character name is a table lookup. Records of earlier versions (clear paths,
 * `ANCHOR//…` names, `k:` digests, padded buckets) are still read and matched.
 *
 * Must never: put a path of a secret-carrying call, an unbound digest or a count
 * in a record; log or return the key; report a path as not held because its entry was
 * keyed with a key it cannot check (an entry whose key id differs holds its whole root).
 */
import { createHmac, randomBytes } from "node:crypto";
import type { TaintedFile } from "./secret-taint.ts";

/** The sentinels a digest field may hold in clear. */
const UNKNOWN = "unknown";
const GONE = "gone";

/** The run's name key, ready to use: never printable. */
export interface NameKey {
  /** 16 hex of HMAC(key, "agentd key id"): which key made an entry (reveals nothing). */
  readonly id: string;
  /** The keyed hash of a path or a digest (64 hex). */
  mac(text: string): string;
}

/** A NameKey of 32 key bytes. */
export function nameKey(bytes: Uint8Array): NameKey {
  const k = Buffer.from(bytes);
  const mac = (text: string): string => createHmac("sha256", k).update(text).digest("hex");
  const id = mac("agentd key id").slice(0, 16);
  return {
    id,
    mac,
    toString: () => `[name key ${id}]`,
    toJSON: () => `[name key ${id}]`,
  } as NameKey;
}

/** A held-name entry's parts, or undefined for a clear path. */
export function parseHeld(
  path: string,
): { anchor: string; keyId: string; mac: string } | undefined {
  const at = path.indexOf("//");
  if (at < 0) return undefined;
  const [keyId = "", mac = ""] = path.slice(at + 2).split(".");
  return { anchor: path.slice(0, at) || "/", keyId, mac };
}

/** The recorded form of a digest: sentinels and "" as they are, the rest keyed. */
export function keyDigest(digest: string, key: NameKey): string {
  if (digest === "" || digest === UNKNOWN || digest === GONE || digest.startsWith("k:"))
    return digest;
  return `k:${key.mac(digest)}`;
}

/** Whether a scan's digest equals a recorded one (keyed, or clear from before keying). */
export function sameDigest(recorded: string, scanned: string, key: NameKey): boolean {
  return recorded.startsWith("k:") ? recorded === keyDigest(scanned, key) : recorded === scanned;
}

/** Each ancestor of `path`, itself first, "/" last (a whole "/" record holds every path). */
function* selfAndAncestors(path: string): Generator<string> {
  for (let p = path; p !== "" && p !== "/"; p = p.slice(0, Math.max(0, p.lastIndexOf("/"))))
    yield p;
  yield "/";
}

interface HeldIndex {
  /** Held names of this run's key, by MAC. */
  macs: Map<string, TaintedFile>;
  /** Anchors whose entries another key made: held as a whole, by anchor. */
  wholes: Map<string, TaintedFile>;
}

function indexOf(taint: ReadonlyMap<string, TaintedFile>, key: NameKey): HeldIndex {
  const macs = new Map<string, TaintedFile>();
  const wholes = new Map<string, TaintedFile>();
  for (const [p, f] of taint) {
    const h = parseHeld(p);
    if (h === undefined) continue;
    if (h.keyId === key.id) macs.set(h.mac, f);
    else wholes.set(h.anchor, f);
  }
  return { macs, wholes };
}

/**
 * The taint entry that holds a clear `path` (itself or an ancestor): a clear entry, a held
 * name whose MAC matches, or an anchor held as a whole (an entry of a key this run's key is
 * not: it can never be matched, so its anchor stands for it). Built once per taint state.
 */
export function heldLookup(
  taint: ReadonlyMap<string, TaintedFile>,
  key: NameKey,
): (path: string) => TaintedFile | undefined {
  const { macs, wholes } = indexOf(taint, key);
  return (path) => {
    for (const p of selfAndAncestors(path)) {
      const f = taint.get(p) ?? (macs.size > 0 ? macs.get(key.mac(p)) : undefined) ?? wholes.get(p);
      if (f !== undefined) return f;
    }
    return undefined;
  };
}

/**
 * A digest bound to the call and the keyed name of its path: `h:MAC(call, pathMAC, digest)`
 * ("" and GONE too). The call matters: unbound to it, a later call's `before` of a path
 * equals an earlier record's digest of it, which joins the two records for any reader and
 * tells the earlier one's real entries from its padding.
 */
export function bindDigest(callId: string, pathMac: string, digest: string, key: NameKey): string {
  return `h:${key.mac(`${callId}\0${pathMac}\0${digest}`)}`;
}

/**
 * Records per root in every sealed `secret.written`: each root the kernel scans gets
 * exactly this many (real ones and padding), whatever the call wrote. A count, a bucket or
 * which roots a call wrote under would be bits the program chose.
 */
export const RECORDS_PER_ROOT = 16;

/**
 * The roots a sealed record is kept under: the writable roots, and "/" for every other
 * path (another mount, a HOME): a fixed list, never the program's choice.
 */
function sealRoots(roots: readonly string[]): string[] {
  return [...roots.filter((r) => r !== "/"), "/"];
}

/** A record's path: `ROOT//KEYID.MAC` ("//KEYID.MAC" under "/"). */
function heldPath(root: string, mac: string, key: NameKey): string {
  return `${root === "/" ? "" : root}//${key.id}.${mac}`;
}

/** The padding records this process made (the log holds them; a run's taint need not). */
const PADDING = new WeakSet<TaintedFile>();

/** Whether `f` is padding sealWrites made: it matches no path, ever. */
export function isPadding(f: TaintedFile): boolean {
  return PADDING.has(f);
}

/** Random records of the sealed form under `root`: no scan ever matches one. */
function padding(root: string, n: number, key: NameKey, callId: string): TaintedFile[] {
  const hex = (): string => randomBytes(32).toString("hex");
  return Array.from({ length: n }, () => {
    const f = {
      path: heldPath(root, hex(), key),
      digest: `h:${hex()}`,
      before: `h:${hex()}`,
      callId,
    };
    PADDING.add(f);
    return f;
  });
}

/**
 * One path's record: keyed name, digests bound to the call (GONE and "" too: a removal, a
 * new path and a record held whole are told from the others by the key only).
 */
function sealed(
  root: string,
  path: string,
  digest: string,
  before: string,
  callId: string,
  key: NameKey,
): TaintedFile {
  const mac = key.mac(path);
  return {
    path: heldPath(root, mac, key),
    digest: bindDigest(callId, mac, digest, key),
    before: bindDigest(callId, mac, before, key),
    callId,
  };
}

/**
 * A root's records, RECORDS_PER_ROOT of them: each path; past that each top-level entry
 * held whole (`npm ci`'s node_modules); past that the root itself held whole ("/" too).
 * A record held whole stands for paths it no longer names (which of them the call removed
 * is the program's choice): no scan ever ends it, not even its path's absence.
 */
function sealRoot(
  root: string,
  writes: readonly TaintedFile[],
  key: NameKey,
  callId: string,
): TaintedFile[] {
  // A path a scan could not tell about (a failed scan: its root) is held whole.
  let records = writes.map((f) =>
    f.digest === UNKNOWN
      ? whole(root, f.path, callId, key)
      : sealed(root, f.path, f.digest, f.before, callId, key),
  );
  if (records.length > RECORDS_PER_ROOT) {
    const tops = new Set(writes.map((f) => topOf(root, f.path)));
    records = [...tops].map((t) => whole(root, t, callId, key));
  }
  if (records.length > RECORDS_PER_ROOT) records = [whole(root, root, callId, key)];
  return [...records, ...padding(root, RECORDS_PER_ROOT - records.length, key, callId)];
}

/**
 * A record that holds `path` and everything under it for the rest of the run: its digest a
 * bound GONE, its `before` a bound "" (secret-taint.ts sealedCleared: cleared only when the
 * path is back as "", which no scan reports).
 */
function whole(root: string, path: string, callId: string, key: NameKey): TaintedFile {
  return sealed(root, path, GONE, "", callId, key);
}

/** The top-level entry of `root` that `path` lies in (the root itself for the root). */
function topOf(root: string, path: string): string {
  const base = root === "/" ? "" : root;
  if (path.length <= base.length + 1) return path;
  return `${base}/${path.slice(base.length + 1).split("/")[0]}`;
}

/** The root a path is sealed under: the longest writable root it lies under, else "/". */
function rootOf(path: string, roots: readonly string[]): string {
  let best = "/";
  for (const r of roots)
    if ((path === r || path.startsWith(`${r}/`)) && r.length > best.length) best = r;
  return best;
}

/**
 * The records of a call's writes (clear paths from writtenBetween) as the log may hold
 * them: every root gets RECORDS_PER_ROOT records (keyed names, bound digests, padding),
 * whatever the call wrote; a path that is not absolute (the container's kernel state)
 * stays as it is.
 */
export function sealWrites(
  writes: readonly TaintedFile[],
  key: NameKey,
  roots: readonly string[],
  callId = writes[0]?.callId ?? "",
): TaintedFile[] {
  const all = sealRoots(roots);
  const byRoot = new Map<string, TaintedFile[]>(all.map((r) => [r, []]));
  const clear: TaintedFile[] = [];
  for (const f of writes) {
    if (!f.path.startsWith("/")) clear.push(f);
    else byRoot.get(rootOf(f.path, all))?.push(f);
  }
  const out = [...clear];
  for (const [root, group] of byRoot) out.push(...sealRoot(root, group, key, callId));
  return byPath(out);
}

/**
 * Records in the order of their recorded path: roots in a fixed order, and within a root
 * the order of keyed names (random to a reader). The order the scans found them in is the
 * program's (new and changed paths first, removed ones after), and padding must not sit
 * where a reader could count it.
 */
function byPath(files: TaintedFile[]): TaintedFile[] {
  return files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** The anchor a person is shown for a held-name entry (undefined: a clear path). */
export function anchorOf(path: string): string | undefined {
  return parseHeld(path)?.anchor;
}
