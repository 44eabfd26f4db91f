/**
 * What a workspace archive may hold, entry by entry: relative normalised paths under the
 * workspace root (no `..`, no absolute paths, no NUL, at most PATH_MAX bytes), regular
 * files, directories and symlinks that stay inside the tree (hard links, devices and fifos
 * refused; a snapshot may keep a hard link to a file listed before it), each path once,
 * nothing nested under a file or symlink, and at most so many entries. Every rule is
 * decided per entry, so an archive can be checked while it streams; the memory the checks
 * keep is bounded by the entry cap, never by the archive's size.
 */
import { createHash } from "node:crypto";
import { posix } from "node:path";
import type * as tar from "tar-stream";
import { AgentdError } from "../errors.ts";

/** uid/gid of the sandbox user in every agentd image. */
export const SANDBOX_UID = 1000;

/** The CreateRun field every refusal names. */
export const FIELD = "workspace_tar";

/** Longest path accepted, bytes: Linux's PATH_MAX; a longer one cannot be unpacked anyway. */
export const MAX_PATH_BYTES = 4096;

export interface ArchiveLimits {
  /** Largest archive accepted as given, bytes (the compressed size for tar.gz). Default 64 MiB. */
  maxArchiveBytes?: number;
  /**
   * Largest unpacked archive, bytes: the tar after decompression, file contents and headers
   * together, so neither a gzip bomb nor a flood of headers can pass it. Default 256 MiB.
   */
  maxUnpackedBytes?: number;
  /** Most entries, counting the parent directories an archive implies. Default 100,000. */
  maxEntries?: number;
  /**
   * For archives the sandbox itself produced (exports for diffs and snapshots): keep links
   * as they are and skip what is not a file, directory or symlink, instead of refusing.
   */
  lenient?: boolean;
  /**
   * With `lenient`: keep a hard link whose target is a regular file listed earlier in the
   * archive (snapshots: cargo's target/, a local `git clone`'s objects), instead of
   * skipping it; a link to anything else is still skipped. Uploads never keep one.
   */
  keepHardLinks?: boolean;
  /**
   * The settings behind the limits, quoted in refusals so an operator knows what to raise,
   * e.g. `{ unpackedBytes: "--max-workspace-bytes" }`.
   */
  settings?: { unpackedBytes?: string; entries?: string };
}

/** Limits for archives the sandbox itself produced (exports for diffs and snapshots). */
export const SANDBOX_EXPORT_LIMITS: ArchiveLimits = {
  maxArchiveBytes: Number.MAX_SAFE_INTEGER,
  maxUnpackedBytes: 4 * 1024 ** 3,
  maxEntries: 10_000_000,
  lenient: true,
};

export const DEFAULT_LIMITS = {
  maxArchiveBytes: 64 * 1024 * 1024,
  maxUnpackedBytes: 256 * 1024 * 1024,
  maxEntries: 100_000,
} as const;

/** One entry as it goes into the normalised tar. */
export interface EntryMeta {
  /** Normalised relative path, e.g. "src/index.ts". */
  path: string;
  /** "link": a hard link (snapshots only, see ArchiveLimits.keepHardLinks). */
  type: "file" | "directory" | "symlink" | "link";
  /** Permission bits (no set-id, no sticky). */
  mode: number;
  /** A symlink's target, as given; a hard link's target path, normalised. */
  linkname?: string;
}

/** A refusal of the archive: INVALID_ARGUMENT naming workspace_tar. */
export function bad(message: string): AgentdError {
  return new AgentdError("EVALIDATION", `${FIELD}: ${message}`, { field: FIELD });
}

/** A limit passed: RESOURCE_EXHAUSTED naming workspace_tar and the setting behind it. */
export function tooLarge(message: string, setting: string | undefined): AgentdError {
  const hint = setting === undefined ? "" : ` (the server's ${setting})`;
  return new AgentdError("ETOOLARGE", `${FIELD}: ${message}${hint}`, { field: FIELD });
}

/** A name as quoted in a message: JSON, cut after 120 characters (names can be 4 MiB). */
export function shown(name: string): string {
  return JSON.stringify(name.length > 120 ? `${name.slice(0, 120)}…` : name);
}

/**
 * A normalised relative path inside the workspace, or an error naming the entry.
 * Refuses absolute paths, `..` anywhere and NUL bytes.
 */
export function normaliseEntryPath(name: string): string {
  if (name.includes("\0")) throw bad(`entry ${shown(name)} has a NUL byte in its name`);
  const stripped = name.replace(/^\.\/+/, "");
  if (stripped.startsWith("/")) throw bad(`entry ${shown(name)} has an absolute path`);
  const parts = stripped.split("/").filter((p) => p !== "" && p !== ".");
  if (parts.includes("..")) throw bad(`entry ${shown(name)} climbs out with '..' (tar-slip)`);
  return parts.join("/");
}

/**
 * What a tar header becomes in the workspace, or undefined for an entry that is dropped
 * (the root directory; in lenient mode devices, fifos, and hard links unless kept).
 */
export function classifyEntry(
  header: tar.Header,
  lenient: boolean,
  keepHardLinks = false,
): EntryMeta | undefined {
  if (Buffer.byteLength(header.name, "utf8") > MAX_PATH_BYTES)
    throw bad(`entry ${shown(header.name)} has a path longer than ${MAX_PATH_BYTES} bytes`);
  const path = normaliseEntryPath(header.name);
  const mode = (header.mode ?? 0o644) & 0o777;
  if (isSparse(header)) {
    // Its content is a sparse map, not the file: unpacked as it is, it would be garbage.
    if (lenient) return undefined;
    throw bad(`entry ${shown(path)} is a sparse file; pack it without --sparse`);
  }
  switch (header.type) {
    case "file":
    case "contiguous-file":
      if (path === "") throw bad("a file entry has an empty name");
      return { path, type: "file", mode };
    case "directory":
      return path === "" ? undefined : { path, type: "directory", mode: mode | 0o700 };
    case "symlink": {
      const linkname = header.linkname ?? "";
      if (Buffer.byteLength(linkname, "utf8") > MAX_PATH_BYTES)
        throw bad(`symlink ${shown(path)} has a target longer than ${MAX_PATH_BYTES} bytes`);
      if (!lenient) checkLinkTarget(path, linkname);
      return { path, type: "symlink", mode: 0o777, linkname };
    }
    case "link":
      if (lenient) return keepHardLinks ? hardLink(path, header.linkname ?? "") : undefined;
      throw bad(`entry ${shown(path)} is a hard link; pack the file itself`);
    default: {
      if (lenient) return undefined;
      // tar-stream gives null for a type it does not know (GNU sparse 'S', volume labels…).
      const kind = header.type === null ? "an unsupported kind of entry" : `a ${header.type}`;
      throw bad(
        `entry ${shown(path)} is ${kind}; only files, directories and symlinks are allowed`,
      );
    }
  }
}

/** A hard link kept (its target normalised), or undefined when its target cannot be one. */
function hardLink(path: string, target: string): EntryMeta | undefined {
  if (path === "" || Buffer.byteLength(target, "utf8") > MAX_PATH_BYTES) return undefined;
  let linkname: string;
  try {
    linkname = normaliseEntryPath(target);
  } catch {
    return undefined; // absolute, climbing out, NUL: no file of this archive
  }
  return linkname === "" ? undefined : { path, type: "link", mode: 0o644, linkname };
}

/** A GNU sparse file in PAX form (GNU.sparse.* keys; type 'S' is an unknown type already). */
function isSparse(header: tar.Header): boolean {
  const pax = header.pax as Record<string, string> | null | undefined;
  return pax != null && Object.keys(pax).some((k) => k.startsWith("GNU.sparse."));
}

/** A symlink must stay inside the tree: a relative target never resolving above the root. */
export function checkLinkTarget(path: string, target: string): void {
  if (target === "" || target.includes("\0"))
    throw bad(`symlink ${shown(path)} has an empty or invalid target`);
  if (target.startsWith("/"))
    throw bad(`symlink ${shown(path)} points to an absolute path (${shown(target)})`);
  const resolved = posix.normalize(posix.join(posix.dirname(path), target));
  if (resolved === ".." || resolved.startsWith("../"))
    throw bad(`symlink ${shown(path)} points outside the workspace (${shown(target)})`);
}

/**
 * The paths of one archive so far: duplicates, entries nested under a file or symlink, and
 * the entry cap. Paths over 64 characters are keyed by a 128-bit hash, so memory is at most
 * about a hundred bytes per entry even for 4 KiB paths, and bounded by the cap.
 */
export class EntryIndex {
  /** What each path is: a directory, a regular file, or another kind (symlink, hard link). */
  readonly #kind = new Map<string, "dir" | "file" | "other">();
  readonly #limits: ArchiveLimits;
  #entries = 0;

  constructor(limits: ArchiveLimits) {
    this.#limits = limits;
  }

  /** Counts one entry of the archive (kept or dropped) against the cap. */
  count(): void {
    const max = this.#limits.maxEntries ?? DEFAULT_LIMITS.maxEntries;
    if (++this.#entries > max)
      throw tooLarge(`the archive holds more than ${max} entries`, this.#limits.settings?.entries);
  }

  /**
   * Registers `entry`. Returns the parent directories the archive did not list, outermost
   * first (to be created before it), or undefined when the entry is to be dropped (a
   * directory listed twice; in lenient mode, an entry under a file or symlink; a hard link
   * whose target is not a regular file listed before it).
   * Throws for a path listed twice, or nested under a file or symlink.
   */
  add(entry: EntryMeta): string[] | undefined {
    const key = keyOf(entry.path);
    const known = this.#kind.get(key);
    if (known !== undefined) {
      if (known === "dir" && entry.type === "directory") return undefined;
      throw bad(`entry ${shown(entry.path)} appears twice`);
    }
    // Restored, a link to anything but a file already unpacked could reach out of the tree.
    if (entry.type === "link" && this.#kind.get(keyOf(entry.linkname ?? "")) !== "file")
      return undefined;
    const missing: string[] = [];
    // Deepest parent first: the first one already known means all above it are too.
    for (let p = parentOf(entry.path); p !== ""; p = parentOf(p)) {
      const kind = this.#kind.get(keyOf(p));
      if (kind === "dir") break;
      if (kind !== undefined) {
        if (this.#limits.lenient === true) return undefined;
        throw bad(`entry ${shown(entry.path)} is inside ${shown(p)}, which is not a directory`);
      }
      missing.push(p);
    }
    missing.reverse();
    for (const p of missing) {
      this.count();
      this.#kind.set(keyOf(p), "dir");
    }
    this.#kind.set(
      key,
      entry.type === "directory" ? "dir" : entry.type === "file" ? "file" : "other",
    );
    return missing;
  }
}

function parentOf(path: string): string {
  const i = path.lastIndexOf("/");
  return i < 0 ? "" : path.slice(0, i);
}

/**
 * A short path is its own key; a longer one is keyed by 128 bits of its sha-256, behind a
 * NUL (which no normalised path holds, so the two kinds never collide).
 */
function keyOf(path: string): string {
  if (path.length <= 64) return path;
  return `\0${createHash("sha256").update(path).digest("base64").slice(0, 22)}`;
}
