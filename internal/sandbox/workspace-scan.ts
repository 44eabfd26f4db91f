/**
 * The two reads of a workspace export that the patch is built from. Pass 1 (`scanExport`)
 * records, per path, what git would: kind, mode, size and blob id, hashing content as it
 * streams by; it keeps only the small `.gitignore` files. Pass 2 (`readContents`) keeps the
 * content of the few paths the patch needs, checking that each is what pass 1 saw.
 * `scanFiles` gives the same record for a workspace already in memory (the base).
 *
 * Must never hold a file's content in pass 1 (except a capped `.gitignore`), nor more than
 * the expected size of a wanted file in pass 2.
 */
import { posix } from "node:path";
import { AgentdError } from "../errors.ts";
import { blobId, createBlobHasher } from "./git-blob-id.ts";
import { isGitMetadata } from "./git-path-rules.ts";
import type { WorkspaceFile } from "./workspace-archive.ts";
import { type ExportEntry, exportEntries } from "./workspace-tar-stream.ts";

/** A git tree entry mode. */
export type GitMode = "100644" | "100755" | "120000";

/** One path of a workspace as git sees it (directories are not entries: git tracks none). */
export interface WorkspaceEntry {
  kind: "file" | "symlink";
  mode: GitMode;
  size: number;
  /** git blob id of the content (a symlink's content is its target). */
  id: string;
  linkname?: string;
  /** The path whose content this one shares (a hard link's first path in the archive). */
  contentPath?: string;
  /** The content, when the workspace is in memory. */
  data?: Buffer;
}

export interface WorkspaceScan {
  entries: Map<string, WorkspaceEntry>;
  /** The text of each `.gitignore`, keyed by its directory ("" for the root). */
  gitignores: Map<string, string>;
  /** Paths present but impossible to carry in a patch, with the reason. */
  unfit: Map<string, string>;
}

/**
 * A `.gitignore` larger than this is not read (git itself skips huge ones): real ones are a
 * few KiB, and a run must not make the worker hold or match megabytes of patterns.
 */
export const MAX_GITIGNORE_BYTES = 64 * 1024;
/** All `.gitignore` files together, read at most (past it, further ones are not read). */
export const MAX_GITIGNORE_TOTAL_BYTES = 1024 * 1024;

/** git keeps only the owner's execute bit. */
export function gitModeOf(kind: "file" | "symlink", mode: number): GitMode {
  if (kind === "symlink") return "120000";
  return mode & 0o100 ? "100755" : "100644";
}

function conflict(message: string): AgentdError {
  return new AgentdError(
    "ECONFLICT",
    `the workspace changed while its patch was made: ${message}; try again once nothing runs in it`,
  );
}

/** How a read is run. */
export interface ScanOptions {
  signal?: AbortSignal;
  /** How a path is shown in an error message (e.g. redacted). Default: JSON-quoted. */
  show?: (path: string) => string;
  /** Most entries pass 1 records (files, links, directories). Default MAX_SCAN_ENTRIES. */
  maxEntries?: number;
}

/**
 * Pass 1 keeps a small record per path (about 200 bytes): a workspace of millions of empty
 * files must not make the worker hold hundreds of MB for it.
 */
export const MAX_SCAN_ENTRIES = 500_000;

const quoted = (p: string): string => JSON.stringify(p);

/** Refuses an archive no file system could hold: a path twice, or inside a non-directory. */
function checkPlace(
  scan: WorkspaceScan,
  dirs: Set<string>,
  path: string,
  show: (p: string) => string,
): void {
  if (scan.entries.has(path) || scan.unfit.has(path) || dirs.has(path))
    throw new AgentdError("EIO", `the workspace export holds ${show(path)} twice`);
  for (let p = posix.dirname(path); p !== "."; p = posix.dirname(p)) {
    if (scan.entries.has(p) || scan.unfit.has(p))
      throw new AgentdError(
        "EIO",
        `the workspace export holds ${show(path)} inside the non-directory ${show(p)}`,
      );
  }
}

/** The budget for `.gitignore` texts kept during one scan. */
function gitignoreKeeper(): (path: string, size: number) => boolean {
  let total = 0;
  return (path, size) => {
    if (posix.basename(path) !== ".gitignore" || size > MAX_GITIGNORE_BYTES) return false;
    if (total + size > MAX_GITIGNORE_TOTAL_BYTES) return false;
    total += size;
    return true;
  };
}

function gitignoreDir(path: string): string {
  const d = posix.dirname(path);
  return d === "." ? "" : d;
}

/** Hashes an entry's content as it streams by; keeps it only when `keep` (a .gitignore). */
async function hashBody(e: ExportEntry, keep: boolean): Promise<{ id: string; kept?: Buffer }> {
  const hash = createBlobHasher(e.size);
  const parts: Buffer[] = [];
  let n = 0;
  for await (const c of e.body) {
    hash.update(c);
    n += c.length;
    if (keep) parts.push(c);
  }
  if (n !== e.size) throw new AgentdError("EIO", "the workspace export ended inside a file");
  return { id: hash.digest("hex"), kept: keep ? Buffer.concat(parts) : undefined };
}

async function addEntry(
  scan: WorkspaceScan,
  dirs: Set<string>,
  e: ExportEntry,
  keepGitignore: (path: string, size: number) => boolean,
): Promise<void> {
  switch (e.type) {
    case "directory":
      dirs.add(e.path);
      return;
    case "file":
    case "contiguous-file": {
      const { id, kept } = await hashBody(e, keepGitignore(e.path, e.size));
      scan.entries.set(e.path, { kind: "file", mode: gitModeOf("file", e.mode), size: e.size, id });
      if (kept) scan.gitignores.set(gitignoreDir(e.path), kept.toString("utf8"));
      return;
    }
    case "symlink": {
      if (e.linkname) scan.entries.set(e.path, symlinkEntry(e.linkname));
      else scan.unfit.set(e.path, "a symlink with an empty target");
      return;
    }
    case "link": {
      // A hard link shares its first path's content (tar writes that one first).
      const first = scan.entries.get(e.linkname ?? "");
      if (first?.kind !== "file")
        scan.unfit.set(e.path, "a hard link to a path the export holds no file at");
      else
        scan.entries.set(e.path, {
          ...first,
          mode: gitModeOf("file", e.mode),
          contentPath: first.contentPath ?? e.linkname,
        });
      return;
    }
    default:
      scan.unfit.set(e.path, `a ${e.type}: a patch carries files and symlinks only`);
  }
}

function symlinkEntry(target: string): WorkspaceEntry {
  const data = Buffer.from(target, "utf8");
  return { kind: "symlink", mode: "120000", size: data.length, id: blobId(data), linkname: target };
}

/** Pass 1: what each path of the export is, without keeping any content but `.gitignore`s. */
export async function scanExport(
  source: AsyncIterable<Uint8Array>,
  opts: ScanOptions = {},
): Promise<WorkspaceScan> {
  const scan: WorkspaceScan = { entries: new Map(), gitignores: new Map(), unfit: new Map() };
  const dirs = new Set<string>();
  const keep = gitignoreKeeper();
  const max = opts.maxEntries ?? MAX_SCAN_ENTRIES;
  for await (const e of exportEntries(source, opts.signal)) {
    if (e.path === "" || isGitMetadata(e.path)) continue;
    if (scan.entries.size + scan.unfit.size + dirs.size >= max)
      throw new AgentdError(
        "ETOOLARGE",
        `the workspace holds more than ${max} files and directories; no patch is made of it`,
      );
    checkPlace(scan, dirs, e.path, opts.show ?? quoted);
    if (e.nameValid) await addEntry(scan, dirs, e, keep);
    else scan.unfit.set(e.path, "its name (or its target) is not valid UTF-8");
  }
  return scan;
}

/** The same record for a workspace in memory; entries keep their content. */
export function scanFiles(files: readonly WorkspaceFile[]): WorkspaceScan {
  const scan: WorkspaceScan = { entries: new Map(), gitignores: new Map(), unfit: new Map() };
  const keep = gitignoreKeeper();
  for (const f of files) {
    if (f.type === "directory" || f.path === "" || isGitMetadata(f.path)) continue;
    if (f.type === "symlink") {
      if (f.linkname) scan.entries.set(f.path, symlinkEntry(f.linkname));
      else scan.unfit.set(f.path, "a symlink with an empty target");
      continue;
    }
    const data = f.data ?? Buffer.alloc(0);
    const mode = gitModeOf("file", f.mode);
    scan.entries.set(f.path, { kind: "file", mode, size: data.length, id: blobId(data), data });
    if (keep(f.path, data.length)) scan.gitignores.set(gitignoreDir(f.path), data.toString("utf8"));
  }
  return scan;
}

/**
 * Pass 2: the content of each wanted path (keyed by content path), each checked against
 * pass 1's size and blob id. Stops reading once it has them all.
 */
export async function readContents(
  source: AsyncIterable<Uint8Array>,
  wanted: ReadonlyMap<string, WorkspaceEntry>,
  opts: ScanOptions = {},
): Promise<Map<string, Buffer>> {
  const show = opts.show ?? quoted;
  const out = new Map<string, Buffer>();
  if (wanted.size === 0) return out;
  for await (const e of exportEntries(source, opts.signal)) {
    const want = e.nameValid ? wanted.get(e.path) : undefined;
    if (want === undefined) continue;
    const isFile = e.type === "file" || e.type === "contiguous-file";
    if (!isFile || e.size !== want.size) throw conflict(`${show(e.path)} is not what it was`);
    const hash = createBlobHasher(e.size);
    // One copy of the content, sized up front (the size check allowed it).
    const data = Buffer.allocUnsafe(e.size);
    let at = 0;
    for await (const c of e.body) {
      hash.update(c);
      at += c.copy(data, at);
    }
    if (at !== e.size || hash.digest("hex") !== want.id)
      throw conflict(`${show(e.path)} has other content`);
    out.set(e.path, data);
    if (out.size === wanted.size) return out;
  }
  const missing = [...wanted.keys()].find((p) => !out.has(p)) ?? "";
  throw conflict(`${show(missing)} is gone`);
}
