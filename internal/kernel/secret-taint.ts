/**
 * Secret containment by mechanism: the files a call that carried a secret wrote.
 *
 * A call carries a secret when the kernel put a secret value into it (a `$ENV.NAME`
 * placeholder it resolved) or when it is an exec run while the run already holds a secret
 * in some file (it can read them). Such a call is bracketed by two scans of every writable
 * place of the sandbox (every read-write mount, the calls' HOMEs: writable-scan.ts): path →
 * digest of the content, link target and metadata. The scan after it also wipes the IPC
 * objects (System V, POSIX queues) and resets directory times. What it created or changed
 * is tainted (`secret.written`, derived from the log by a takeover). A taint ends only when
 * a scan finds the path gone or exactly as before the call — never on the model's word.
 * Encodings cannot escape this: the taint follows the bytes' location, not their form.
 * An exec that carried a secret also holds the container itself (CONTAINER_STATE): kernel
 * state no scan sees (the PID counter, a tmpfs's next inode number, the inode numbers of
 * remade directories) can carry the value to a later program, so every later exec waits
 * for a person for the rest of the run; no scan ends that entry.
 * The log never holds a name such a call made, nor an unkeyed digest (held-names.ts): the
 * taint's keys are clear paths that existed before the call, and `ANCHOR//KEYID.MAC` entries
 * for the rest; every check hashes the candidate path and its ancestors (heldLookup).
 *
 * Must never: read a file's content out of the sandbox (only digests come back), clear a
 * taint without a scan, or answer "nothing written" when a scan failed (it taints the roots).
 */
import { create } from "@bufbuild/protobuf";
import type { EventPayload } from "../eventlog/event-codec.ts";
import { type Event, SecretFileSchema, SecretWrittenSchema } from "../gen/agentd/v1/events_pb.js";
import type { SandboxHandle } from "../sandbox/port.ts";
import {
  anchorOf,
  bindDigest,
  heldLookup,
  type NameKey,
  parseHeld,
  sameDigest,
} from "./held-names.ts";
import { scanWritable as scanWith, type WritableScan } from "./writable-scan.ts";

/**
 * The places a call can write that are always scanned (the root filesystem is read-only);
 * the scan adds every other read-write mount it finds (writable-scan.ts), and these are the
 * roots a failed scan taints.
 */
export const WRITABLE_ROOTS: readonly string[] = ["/workspace", "/tmp", "/cache", "/dev/shm"];
/** Tools that run a program: a program can read any file. */
export const EXEC_TOOLS: ReadonlySet<string> = new Set([
  "process.run",
  "test.run",
  "lint.run",
  "setup.run",
]);
/** The digest of a path a failed scan could not tell about (never cleared by a scan). */
export const UNKNOWN = "unknown";
/** The digest of a path a secret-carrying call removed (cleared when it is back as before). */
export const GONE = "gone";

/**
 * The pseudo-path of the container's kernel state, held once an exec carried a secret:
 * recorded in `secret.written` like a file (digest UNKNOWN, so no scan ever ends it).
 * Not a path: it never starts with "/", so only execs (which read every taint) see it.
 */
export const CONTAINER_STATE = "container:";

/** The container-state entry of an exec that carried a secret. */
export function containerState(callId: string): TaintedFile {
  return { path: CONTAINER_STATE, digest: UNKNOWN, before: "", callId };
}

export interface TaintedFile {
  path: string;
  /** The digest at the writing call's end ("dir:…", "file:…", "link:…", "other:…", or UNKNOWN). */
  digest: string;
  /** The digest before the call; "" when the path did not exist. */
  before: string;
  /** The call that wrote it. */
  callId: string;
}

export { parseScan, type WritableScan } from "./writable-scan.ts";

/** One scan of every writable place (`wipe`: after a secret-carrying call). Undefined: unsure. */
export function scanWritable(
  sandbox: SandboxHandle,
  signal?: AbortSignal,
  wipe = false,
): Promise<WritableScan | undefined> {
  return scanWith(sandbox, WRITABLE_ROOTS, { ...(signal === undefined ? {} : { signal }), wipe });
}

/**
 * What a call wrote: paths new, changed or removed between two scans (unsure: every root).
 * A removal is a write too: which of the paths a secret-carrying call removed can spell
 * the secret (`ls` reads it back), so a removed path is tainted as GONE.
 */
export function writtenBetween(
  before: WritableScan | undefined,
  after: WritableScan | undefined,
  callId: string,
): TaintedFile[] {
  if (before === undefined || after === undefined) return unknownRoots(callId);
  const out: TaintedFile[] = [];
  for (const [path, digest] of after) {
    const was = before.get(path) ?? "";
    if (was !== digest) out.push({ path, digest, before: was, callId });
  }
  for (const [path, was] of before)
    if (!after.has(path)) out.push({ path, digest: GONE, before: was, callId });
  return out;
}

/** The taint of a call the kernel could not scan: every writable root, never cleared. */
export function unknownRoots(callId: string): TaintedFile[] {
  return WRITABLE_ROOTS.map((path) => ({ path, digest: UNKNOWN, before: "", callId }));
}

/**
 * Whether a scan shows a tainted file gone or exactly as before its call (content and
 * metadata); a path the call removed, only once it is back exactly as before. A sealed
 * record (`h:` digests, held-names.ts) is matched through the keyed names of the scan's
 * paths (`byMac`); padding never matches, so it ends at the first scan.
 */
export function isCleared(
  f: TaintedFile,
  scan: WritableScan,
  key: NameKey,
  byMac?: ReadonlyMap<string, string>,
): boolean {
  if (f.digest === UNKNOWN) return false;
  const held = parseHeld(f.path);
  // An entry another key made can never be matched: it stays.
  if (held !== undefined && held.keyId !== key.id) return false;
  if (held !== undefined && f.digest.startsWith("h:"))
    return sealedCleared(f, held.mac, key, byMac);
  const now = held === undefined ? scan.get(f.path) : byMac?.get(held.mac);
  if (f.digest === GONE) return now !== undefined && sameDigest(f.before, now, key);
  return now === undefined || (f.before !== "" && sameDigest(f.before, now, key));
}

/** isCleared for a sealed record: its kind (removed, new, changed) is told by the key only. */
function sealedCleared(
  f: TaintedFile,
  mac: string,
  key: NameKey,
  byMac: ReadonlyMap<string, string> | undefined,
): boolean {
  const now = byMac?.get(mac);
  const bind = (digest: string) => bindDigest(f.callId, mac, digest, key);
  const same = now !== undefined && bind(now) === f.before;
  if (f.digest === bind(GONE)) return same;
  return now === undefined || (f.before !== bind("") && same);
}

/**
 * A scan's digests by the keyed hash of their path, for the paths under an anchor of a held
 * name only (a workspace's node_modules is not hashed for a name held in /tmp) and the
 * anchor itself (a root whose own mode a call changed is a record of that root); undefined
 * when no held name exists.
 */
function scanByMac(
  taint: ReadonlyMap<string, TaintedFile>,
  scan: WritableScan,
  key: NameKey,
): Map<string, string> | undefined {
  const anchors = new Set<string>();
  for (const p of taint.keys()) {
    const a = anchorOf(p);
    if (a !== undefined) anchors.add(a === "/" ? "" : a);
  }
  if (anchors.size === 0) return undefined;
  const out = new Map<string, string>();
  for (const [path, digest] of scan) {
    let under = false;
    for (let p = path; !under && p !== ""; p = p.slice(0, Math.max(0, p.lastIndexOf("/"))))
      under = anchors.has(p);
    if (under || anchors.has("")) out.set(key.mac(path), digest);
  }
  return out;
}

/**
 * Drops the taints a fresh scan shows ended; a failed scan ends none. Only runs that hold
 * a taint pay for the scan.
 */
export async function refreshTaint(
  taint: Map<string, TaintedFile>,
  sandbox: SandboxHandle,
  key: NameKey,
  signal?: AbortSignal,
): Promise<void> {
  if (taint.size === 0) return;
  const scan = await scanWritable(sandbox, signal);
  if (scan === undefined) return;
  const byMac = scanByMac(taint, scan, key);
  for (const [path, f] of taint) if (isCleared(f, scan, key, byMac)) taint.delete(path);
}

/** The `secret.written` event of a call. */
export function secretWrittenEvent(callId: string, files: readonly TaintedFile[]): EventPayload {
  return {
    case: "secretWritten",
    value: create(SecretWrittenSchema, {
      callId,
      files: files.map((f) =>
        create(SecretFileSchema, { path: f.path, digest: f.digest, before: f.before }),
      ),
    }),
  };
}

/**
 * The run's taint as its log records it: per call, its last `secret.written` (a call's
 * first one, appended before it runs, taints every root; the one after its scan replaces
 * it). A taker thus knows every file written by a secret-carrying call, including one cut
 * off mid-call. Taints a scan ended are dropped again by the next refreshTaint.
 */
export function taintFromEvents(events: readonly Event[]): Map<string, TaintedFile> {
  const byCall = new Map<string, TaintedFile[]>();
  for (const e of events) {
    if (e.payload.case !== "secretWritten") continue;
    const v = e.payload.value;
    byCall.delete(v.callId); // insertion order follows the latest record
    byCall.set(
      v.callId,
      v.files.map((f) => ({ path: f.path, digest: f.digest, before: f.before, callId: v.callId })),
    );
  }
  const taint = new Map<string, TaintedFile>();
  for (const files of byCall.values()) for (const f of files) taint.set(f.path, f);
  return taint;
}

/** Whether `path` (absolute, clear) is a tainted path or lies under one (names hashed). */
export function taintOf(
  taint: ReadonlyMap<string, TaintedFile>,
  path: string,
  key: NameKey,
): TaintedFile | undefined {
  return heldLookup(taint, key)(path);
}

/**
 * Where sealed records are kept, as a person is shown them: every root, always all of them.
 * Which roots hold a record, and whether any does once an exec carried a secret, are the
 * program's choice: a preview or reason naming only some would tell it.
 */
export const SEALED_SHOWN: readonly string[] = [
  ...WRITABLE_ROOTS.map((r) => `${r}/… (names held)`),
  "/… (names held)",
];

/** Whether `taint` holds sealed records or the container's state (the fixed list is shown). */
function showsSealed(taint: ReadonlyMap<string, TaintedFile>): boolean {
  for (const p of taint.keys()) if (p === CONTAINER_STATE || anchorOf(p) !== undefined) return true;
  return false;
}

/** The clear paths, with their calls (records of earlier versions): shown as they are. */
function clearPaths(taint: ReadonlyMap<string, TaintedFile>): TaintedFile[] {
  return [...taint.values()].filter(
    (f) => f.path !== CONTAINER_STATE && anchorOf(f.path) === undefined,
  );
}

/**
 * The preview's line for a person: which files hold a secret and whether the container's
 * kernel state may carry one. Sealed records are named by the fixed list of roots, without
 * a count or a call: never which roots the program wrote under.
 */
export function describeTaint(taint: ReadonlyMap<string, TaintedFile>): string {
  const parts: string[] = [];
  const clear = clearPaths(taint).map((f) => `${f.path} (call ${f.callId})`);
  if (showsSealed(taint))
    clear.push(
      `paths in ${WRITABLE_ROOTS.join(", ")} and elsewhere (which, where and how many: held)`,
    );
  if (clear.length > 0) {
    const more = clear.length > 20 ? ` and ${clear.length - 20} more` : "";
    parts.push(`the run may hold a secret in ${clear.slice(0, 20).join(", ")}${more}`);
  }
  const state = taint.get(CONTAINER_STATE);
  if (state !== undefined)
    parts.push(
      `the container's kernel state (process and inode counters) may carry a secret since call ${state.callId}, an exec that carried one`,
    );
  return `${parts.join("; ")}: this call could read it`;
}

/**
 * The held paths that are files: clear paths as they are, and the fixed list of roots as
 * `ROOT/… (names held)` whenever a sealed record or the container's state is held.
 */
export function heldFiles(taint: ReadonlyMap<string, TaintedFile>): string[] {
  const out = clearPaths(taint).map((f) => f.path);
  if (showsSealed(taint)) out.push(...SEALED_SHOWN);
  return out;
}

/** Whether the run holds a secret in `root` or anything under it. */
export function holdsSecretUnder(
  taint: ReadonlyMap<string, TaintedFile> | undefined,
  root: string,
): boolean {
  if (taint === undefined) return false;
  for (const p of taint.keys()) if (p === root || p.startsWith(`${root}/`)) return true;
  return false;
}
