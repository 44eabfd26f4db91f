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
 * `/cache`, `/dev/shm`, another mount's top: the kernel's choice, not the program's) and MAC
 * the HMAC-SHA256 of the path under the run's name key (EventLog.runNameKey: kept beside
 * the run's log, never in an event, never served by the API); every digest is
 * `h:MAC(call, pathMAC, digest)` (bound to its call and path, so equal contents, removals
 * and new files look alike, and no record joins another); and each root's records are padded with random entries of the same form to
 * a power of two (at least 4), so what a reader learns of the count is its bucket (a few
 * bits per root and call). Checks hash the candidate path and each of its ancestors
 * (heldLookup); the scans that end a hold hash the paths under a root that has records.
 * Keying matters: an unkeyed hash of a one-character name is a table lookup.
 * Past MAX_HELD_NAMES records (or MAX_HELD_NAME_BYTES) each top-level entry of a root the
 * call wrote under (`/workspace/node_modules`) is held as a whole by its keyed name
 * (digest UNKNOWN: no scan ends it), padded the same way; if that is still too much, every
 * root the call wrote under, as after a failed scan. Records of earlier versions (clear
 * paths, `ANCHOR//…` names, `k:` digests) are still read and matched.
 *
 * Must never: put a path of a secret-carrying call, an unbound digest or an unpadded count
 * in a record; log or return the key; report a path as not held because its entry was
 * keyed with a key it cannot check (an entry whose key id differs holds its whole root).
 */
import { createHmac, randomBytes } from "node:crypto";
import type { TaintedFile } from "./secret-taint.ts";

/** The sentinels a digest field may hold in clear. */
const UNKNOWN = "unknown";
const GONE = "gone";

/** More records than this in one call: held names' anchors are held as a whole. */
export const MAX_HELD_NAMES = 1000;
/**
 * Nor more than this many bytes of records (an estimate of their JSON): half the log's
 * 512 KiB event limit (MAX_EVENT_BYTES), so a `secret.written` always fits.
 */
export const MAX_HELD_NAME_BYTES = 256 * 1024;
/** The JSON a record costs beyond its three strings (field names, quotes, the call id). */
const RECORD_OVERHEAD = 64;

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

/** Each ancestor of `path`, itself first, "/" left out. */
function* selfAndAncestors(path: string): Generator<string> {
  for (let p = path; p !== "" && p !== "/"; p = p.slice(0, Math.max(0, p.lastIndexOf("/"))))
    yield p;
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

/** The root a path with no clear ancestor is anchored at (also: held at past the bounds). */
function fallbackAnchor(path: string, roots: readonly string[]): string {
  let best = "";
  for (const r of roots) if (path.startsWith(`${r}/`) && r.length > best.length) best = r;
  // Another mount (an image's VOLUME): its top-level directory, never "/" (no lookup
  // walks up to "/").
  return best !== "" ? best : `/${path.split("/")[1] ?? ""}`;
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

/** The padded size of `n` records: a power of two, at least 4 (none stays none). */
export function paddedCount(n: number): number {
  if (n === 0) return 0;
  let size = 4;
  while (size < n) size *= 2;
  return size;
}

/** Random records of the sealed form under `root`: no scan ever matches one. */
function padding(root: string, n: number, key: NameKey, digest?: string): TaintedFile[] {
  const hex = (): string => randomBytes(32).toString("hex");
  return Array.from({ length: n }, () => ({
    path: `${root}//${key.id}.${hex()}`,
    digest: digest ?? `h:${hex()}`,
    before: digest === undefined ? `h:${hex()}` : "",
    callId: "",
  }));
}

/** Groups records by root and pads each group (padding's call id set to `callId`). */
function padByRoot(
  byRoot: ReadonlyMap<string, TaintedFile[]>,
  key: NameKey,
  callId: string,
  digest?: string,
): TaintedFile[] {
  const out: TaintedFile[] = [];
  for (const [root, group] of byRoot) {
    out.push(...group);
    const extra = padding(root, paddedCount(group.length) - group.length, key, digest);
    out.push(...extra.map((f) => ({ ...f, callId })));
  }
  return out;
}

/**
 * The records of a call's writes (clear paths from writtenBetween) as the log may hold
 * them: every path keyed under its root, digests bound, each root's records padded; past
 * the bounds each top-level entry held whole, then each root (as after a failed scan).
 */
export function sealWrites(
  writes: readonly TaintedFile[],
  key: NameKey,
  roots: readonly string[],
): TaintedFile[] {
  const callId = writes[0]?.callId ?? "";
  const clear: TaintedFile[] = [];
  const named = new Map<string, TaintedFile[]>();
  /** Per root, its top-level entries the call wrote under (held whole past the bounds). */
  const tops = new Map<string, Set<string>>();
  for (const f of writes) {
    if (f.digest === UNKNOWN || !f.path.startsWith("/")) {
      clear.push(f);
      continue;
    }
    const root = fallbackAnchor(f.path, roots);
    const mac = key.mac(f.path);
    const group = named.get(root) ?? [];
    group.push({
      path: `${root}//${key.id}.${mac}`,
      digest: bindDigest(f.callId, mac, f.digest, key),
      before: bindDigest(f.callId, mac, f.before, key),
      callId: f.callId,
    });
    named.set(root, group);
    const top =
      f.path.length > root.length ? `${root}/${f.path.slice(root.length + 1).split("/")[0]}` : root;
    tops.set(root, (tops.get(root) ?? new Set()).add(top));
  }
  const all = [...clear, ...padByRoot(named, key, callId)];
  if (fits(all)) return byPath(all);
  // Too many to record: each top-level entry (`npm ci`'s node_modules) is held as a whole,
  // by its keyed name, for the rest of the run.
  const wholes = new Map(
    [...tops].map(([root, set]) => [
      root,
      [...set].map((t) => ({
        path: `${root}//${key.id}.${key.mac(t)}`,
        digest: UNKNOWN,
        before: "",
        callId,
      })),
    ]),
  );
  const trees = [...clear, ...padByRoot(wholes, key, callId, UNKNOWN)];
  if (fits(trees)) return byPath(trees);
  // Still too many: every root the call wrote under, as after a failed scan.
  const whole = (path: string): TaintedFile => ({ path, digest: UNKNOWN, before: "", callId });
  return byPath([...clear, ...[...named.keys()].map(whole)]);
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

/** Whether records fit one `secret.written` (MAX_HELD_NAMES, MAX_HELD_NAME_BYTES). */
function fits(files: readonly TaintedFile[]): boolean {
  if (files.length > MAX_HELD_NAMES) return false;
  let bytes = 0;
  for (const f of files)
    bytes += f.path.length + f.digest.length + f.before.length + RECORD_OVERHEAD;
  return bytes <= MAX_HELD_NAME_BYTES;
}

/** The anchor a person is shown for a held-name entry (undefined: a clear path). */
export function anchorOf(path: string): string | undefined {
  return parseHeld(path)?.anchor;
}

/**
 * The omissions as run.completed may record them: a file whose name a secret-carrying call
 * made is named by its anchor only (`DIR/[names held]`, once per anchor).
 */
export function omissionsShown<O extends { path: string; reason: string }>(
  omitted: readonly O[],
  withheld: ((path: string) => { reason: string; anchor?: string } | undefined) | undefined,
): { path: string; reason: string }[] {
  const out: { path: string; reason: string }[] = [];
  const anchors = new Set<string>();
  for (const o of omitted) {
    const anchor = withheld?.(o.path)?.anchor;
    if (anchor === undefined) {
      out.push(o);
      continue;
    }
    const rel = anchor === "/workspace" ? "" : anchor.replace(/^\/workspace\//, "");
    const path = rel === "" ? "[names held]" : `${rel}/[names held]`;
    if (anchors.has(path)) continue;
    anchors.add(path);
    out.push({ path, reason: o.reason });
  }
  return out;
}
