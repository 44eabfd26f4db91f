/**
 * Held names: what of a secret-carrying call's writes the log may record in clear.
 *
 * A program that holds a secret can spell it in the NAME of a path it makes
 * (`touch "/tmp/$(printf %s "$ENV.T" | rev)"`, one character per directory level, base32
 * …), and in the metadata a digest covers (a directory's digest is its mode and owner: nine
 * mode bits per directory). So a `secret.written` record keys both with the run's name key
 * (HMAC-SHA256; EventLog.runNameKey: kept beside the run's log, never in an event, never
 * served by the API): a path the call made or renamed — one that was not in the scan it
 * took before the call, or that lies under a name already held — is recorded as
 * `ANCHOR//KEYID.MAC`, where ANCHOR is its nearest ancestor the scan before the call saw
 * and whose name is not held (a name that existed before the call: in clear), and every
 * digest as `k:MAC`. Checks hash the candidate path and each of its ancestors
 * (heldLookup). Keying matters: an unkeyed hash of a one-character name is a table lookup.
 * Past MAX_HELD_NAMES records (or MAX_HELD_NAME_BYTES) each new subtree (the held path
 * right under an anchor) is held as a whole by its keyed name instead (digest UNKNOWN: no
 * scan ends it, every name under it stays held); if that is still too much, each anchor
 * is; then every root the call wrote under, as after a failed scan.
 *
 * Must never: put a held name, or an unkeyed digest, in a record; log or return the key;
 * report a path as not held because its entry was keyed with a key it cannot check (an
 * entry whose key id differs holds its whole anchor).
 */
import { createHmac } from "node:crypto";
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

/**
 * Whether the name of `path` is held: itself or an ancestor is a held name, or an ancestor
 * is held as a whole or with digest UNKNOWN (a failed scan's root, an anchor past the
 * bounds), under which names of earlier secret-carrying calls were never recorded.
 */
function nameIsHeld(
  path: string,
  taint: ReadonlyMap<string, TaintedFile>,
  key: NameKey,
  ix: HeldIndex,
): boolean {
  for (const p of selfAndAncestors(path)) {
    if (ix.macs.size > 0 && ix.macs.has(key.mac(p))) return true;
    if (p !== path && (ix.wholes.has(p) || taint.get(p)?.digest === UNKNOWN)) return true;
  }
  return false;
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
 * The records of a call's writes (clear paths from writtenBetween) as the log may hold
 * them: new names and names under held ones keyed, digests keyed, past the bounds anchors
 * held as a whole. `before`: the scan before the call (undefined: writes are the roots).
 */
export function sealWrites(
  writes: readonly TaintedFile[],
  before: ReadonlyMap<string, string> | undefined,
  taint: ReadonlyMap<string, TaintedFile>,
  key: NameKey,
  roots: readonly string[],
): TaintedFile[] {
  const ix = indexOf(taint, key);
  const held = (p: string): boolean =>
    before === undefined || !before.has(p) || nameIsHeld(p, taint, key, ix);
  const clear: TaintedFile[] = [];
  const named = new Map<string, TaintedFile[]>();
  /** Per anchor, the held paths right under it (subtrees a bound holds whole). */
  const subtrees = new Map<string, Set<string>>();
  for (const f of writes) {
    const sealed = { ...f, digest: keyDigest(f.digest, key), before: keyDigest(f.before, key) };
    if (f.digest === UNKNOWN || !f.path.startsWith("/") || !held(f.path)) {
      clear.push(sealed);
      continue;
    }
    let anchor = f.path.slice(0, Math.max(0, f.path.lastIndexOf("/")));
    while (anchor !== "" && held(anchor)) anchor = anchor.slice(0, anchor.lastIndexOf("/"));
    if (anchor === "") anchor = fallbackAnchor(f.path, roots);
    const group = named.get(anchor) ?? [];
    group.push({ ...sealed, path: `${anchor}//${key.id}.${key.mac(f.path)}` });
    named.set(anchor, group);
    const top = `${anchor === "/" ? "" : anchor}/${f.path.slice(anchor.length + 1).split("/")[0]}`;
    subtrees.set(anchor, (subtrees.get(anchor) ?? new Set()).add(top));
  }
  const all = [...clear, ...[...named.values()].flat()];
  if (fits(all)) return all;
  // Too many to record: each new subtree (`npm ci`'s node_modules) is held as a whole, by
  // its keyed name, for the rest of the run.
  const callId = writes[0]?.callId ?? "";
  const whole = (path: string): TaintedFile => ({ path, digest: UNKNOWN, before: "", callId });
  const trees = [...subtrees].flatMap(([anchor, tops]) =>
    [...tops].map((t) => whole(`${anchor}//${key.id}.${key.mac(t)}`)),
  );
  if (fits([...clear, ...trees])) return [...clear, ...trees];
  // Still too many: each anchor is held as a whole.
  const anchored = [...clear.filter((f) => !named.has(f.path)), ...[...named.keys()].map(whole)];
  if (fits(anchored)) return anchored;
  // Still too much: every root the call wrote under, as after a failed scan.
  const tops = new Set(
    writes.filter((f) => f.path.startsWith("/")).map((f) => fallbackAnchor(f.path, roots)),
  );
  return [...writes.filter((f) => !f.path.startsWith("/")), ...[...tops].map(whole)];
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
