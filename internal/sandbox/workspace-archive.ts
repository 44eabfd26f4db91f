/**
 * Workspace archives: validates an uploaded tar (or tar.gz) and rewrites it into the one
 * form a sandbox accepts: relative, normalised paths under the workspace root, regular
 * files, directories and in-tree symlinks only, owned by the sandbox user, no set-id bits.
 * Everything is checked before anything is written anywhere: a bad archive is refused
 * whole (tar-slip, absolute paths, devices, links out of the tree, size limits).
 */
import { lstat, readdir, readFile, readlink } from "node:fs/promises";
import { join, posix } from "node:path";
import { Readable } from "node:stream";
import { gunzipSync } from "node:zlib";
import * as tar from "tar-stream";
import { AgentdError } from "../errors.ts";

/** uid/gid of the sandbox user in every agentd image. */
export const SANDBOX_UID = 1000;

export interface ArchiveLimits {
  /** Largest archive accepted, bytes (compressed size for tar.gz). Default 64 MiB. */
  maxArchiveBytes?: number;
  /** Largest total size of the files inside, bytes. Default 512 MiB. */
  maxContentBytes?: number;
  /** Most entries. Default 100,000. */
  maxEntries?: number;
  /**
   * For archives the sandbox itself produced (exports for diffs and snapshots): keep links
   * as they are and skip what is not a file, directory or symlink, instead of refusing.
   */
  lenient?: boolean;
}

/** Limits for archives the sandbox itself produced (exports for diffs and snapshots). */
export const SANDBOX_EXPORT_LIMITS: ArchiveLimits = {
  maxArchiveBytes: Number.MAX_SAFE_INTEGER,
  maxContentBytes: 4 * 1024 ** 3,
  maxEntries: 10_000_000,
  lenient: true,
};

/** One file of a workspace, in memory. */
export interface WorkspaceFile {
  /** Normalised relative path, e.g. "src/index.ts". */
  path: string;
  type: "file" | "directory" | "symlink";
  /** Permission bits (no set-id, no sticky). */
  mode: number;
  /** File content (files only). */
  data?: Buffer;
  /** Link target (symlinks only), relative. */
  linkname?: string;
}

const FIELD = "workspace_tar";

function bad(message: string): AgentdError {
  return new AgentdError("EVALIDATION", `${FIELD}: ${message}`, { field: FIELD });
}

/**
 * A normalised relative path inside the workspace, or an error naming the entry.
 * Refuses absolute paths, `..` anywhere, NUL bytes and empty names.
 */
export function normaliseEntryPath(name: string): string {
  if (name.includes("\0")) throw bad(`entry ${JSON.stringify(name)} has a NUL byte in its name`);
  const stripped = name.replace(/^\.\/+/, "");
  if (stripped.startsWith("/")) throw bad(`entry ${JSON.stringify(name)} has an absolute path`);
  const parts = stripped.split("/").filter((p) => p !== "" && p !== ".");
  if (parts.includes(".."))
    throw bad(`entry ${JSON.stringify(name)} climbs out with '..' (tar-slip)`);
  return parts.join("/");
}

/** Parses and checks an uploaded workspace archive (tar or gzip-compressed tar). */
export async function readWorkspaceArchive(
  data: Uint8Array,
  limits: ArchiveLimits = {},
): Promise<WorkspaceFile[]> {
  const maxArchive = limits.maxArchiveBytes ?? 64 * 1024 * 1024;
  const maxContent = limits.maxContentBytes ?? 512 * 1024 * 1024;
  const maxEntries = limits.maxEntries ?? 100_000;
  if (data.byteLength > maxArchive) {
    throw new AgentdError(
      "ETOOLARGE",
      `${FIELD}: archive is ${data.byteLength} bytes; at most ${maxArchive}`,
      { field: FIELD },
    );
  }
  let buf = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (buf[0] === 0x1f && buf[1] === 0x8b) {
    try {
      buf = gunzipSync(buf, { maxOutputLength: maxContent + 64 * 1024 * 1024 });
    } catch (err) {
      throw bad(`gzip data is corrupt or too large: ${(err as Error).message}`);
    }
  }
  if (buf.byteLength < 512 || buf.subarray(257, 262).toString("latin1") !== "ustar") {
    throw bad("is not a tar archive (no ustar header)");
  }
  const files: WorkspaceFile[] = [];
  const seen = new Set<string>();
  let total = 0;
  const extract = tar.extract();
  const done = new Promise<void>((resolve, reject) => {
    extract.on("entry", (header, stream, next) => {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: unknown) => {
        const c = chunk as Buffer;
        total += c.length;
        if (total > maxContent) {
          stream.destroy();
          extract.destroy(
            new AgentdError("ETOOLARGE", `${FIELD}: content exceeds ${maxContent} bytes`, {
              field: FIELD,
            }),
          );
          return;
        }
        chunks.push(c);
      });
      stream.on("end", () => {
        try {
          const f = toWorkspaceFile(header, Buffer.concat(chunks), limits.lenient === true);
          if (f !== undefined) {
            if (files.length >= maxEntries) throw bad(`more than ${maxEntries} entries`);
            if (seen.has(f.path) && f.type !== "directory")
              throw bad(`entry ${JSON.stringify(f.path)} appears twice`);
            seen.add(f.path);
            files.push(f);
          }
          next();
        } catch (err) {
          extract.destroy(err as Error);
        }
      });
      stream.on("error", () => undefined);
    });
    extract.on("finish", resolve);
    extract.on("error", (err) =>
      reject(err instanceof AgentdError ? err : bad(`corrupt tar: ${(err as Error).message}`)),
    );
  });
  Readable.from([buf]).pipe(extract);
  await done;
  if (limits.lenient !== true) checkLinks(files);
  return files;
}

function toWorkspaceFile(
  header: tar.Header,
  data: Buffer,
  lenient: boolean,
): WorkspaceFile | undefined {
  const path = normaliseEntryPath(header.name);
  const mode = (header.mode ?? 0o644) & 0o777;
  switch (header.type) {
    case "file":
    case "contiguous-file":
      if (path === "") throw bad("a file entry has an empty name");
      return { path, type: "file", mode, data };
    case "directory":
      return path === "" ? undefined : { path, type: "directory", mode: mode | 0o700 };
    case "symlink":
      return { path, type: "symlink", mode: 0o777, linkname: header.linkname ?? "" };
    case "link":
      if (lenient) return undefined;
      throw bad(`entry ${JSON.stringify(path)} is a hard link; pack the file itself`);
    default:
      if (lenient) return undefined;
      throw bad(
        `entry ${JSON.stringify(path)} is a ${header.type}; only files, directories and symlinks are allowed`,
      );
  }
}

/** Symlinks must stay inside the tree: relative, and never resolving above the root. */
function checkLinks(files: readonly WorkspaceFile[]): void {
  for (const f of files) {
    if (f.type !== "symlink") continue;
    const target = f.linkname ?? "";
    if (target === "" || target.includes("\0"))
      throw bad(`symlink ${JSON.stringify(f.path)} has an empty or invalid target`);
    if (target.startsWith("/"))
      throw bad(`symlink ${JSON.stringify(f.path)} points to an absolute path (${target})`);
    const resolved = posix.normalize(posix.join(posix.dirname(f.path), target));
    if (resolved === ".." || resolved.startsWith("../")) {
      throw bad(`symlink ${JSON.stringify(f.path)} points outside the workspace (${target})`);
    }
  }
}

/** Packs files into the normalised tar a sandbox receives (owned by the sandbox user). */
export async function packWorkspace(files: readonly WorkspaceFile[]): Promise<Buffer> {
  const pack = tar.pack();
  const out: Buffer[] = [];
  pack.on("data", (c: unknown) => out.push(c as Buffer));
  const ended = new Promise<void>((resolve, reject) => {
    pack.on("end", resolve);
    pack.on("error", reject);
  });
  const mtime = new Date(0);
  const base = { uid: SANDBOX_UID, gid: SANDBOX_UID, uname: "agent", gname: "agent", mtime };
  const dirs = new Set<string>();
  const ensureParents = (p: string): void => {
    const parts = p.split("/");
    for (let i = 1; i < parts.length; i++) {
      const d = parts.slice(0, i).join("/");
      if (!dirs.has(d)) {
        dirs.add(d);
        pack.entry({ ...base, name: `${d}/`, type: "directory", mode: 0o755 });
      }
    }
  };
  for (const f of files) {
    ensureParents(f.path);
    if (f.type === "directory") {
      if (dirs.has(f.path)) continue;
      dirs.add(f.path);
      pack.entry({ ...base, name: `${f.path}/`, type: "directory", mode: f.mode });
    } else if (f.type === "symlink") {
      pack.entry({
        ...base,
        name: f.path,
        type: "symlink",
        linkname: f.linkname ?? "",
        mode: 0o777,
      });
    } else {
      pack.entry({ ...base, name: f.path, type: "file", mode: f.mode }, f.data ?? Buffer.alloc(0));
    }
  }
  pack.finalize();
  await ended;
  return Buffer.concat(out);
}

/** Validates an uploaded archive and returns its normalised tar. */
export async function normaliseWorkspaceArchive(
  data: Uint8Array,
  limits: ArchiveLimits = {},
): Promise<Buffer> {
  return packWorkspace(await readWorkspaceArchive(data, limits));
}

/**
 * Reads a host directory into workspace files (dev mode: the directory is copied, never
 * bind-mounted). Skips what cannot be carried (sockets, devices) and refuses links that
 * leave the tree. `skip` filters relative paths (e.g. node_modules).
 */
export async function readHostDirectory(
  root: string,
  opts: { skip?: (relPath: string) => boolean; maxContentBytes?: number } = {},
): Promise<WorkspaceFile[]> {
  const maxContent = opts.maxContentBytes ?? 512 * 1024 * 1024;
  const files: WorkspaceFile[] = [];
  let total = 0;
  const walk = async (rel: string): Promise<void> => {
    const entries = await readdir(join(root, rel), { withFileTypes: true });
    entries.sort((a, b) => (a.name < b.name ? -1 : 1));
    for (const e of entries) {
      const p = rel === "" ? e.name : `${rel}/${e.name}`;
      if (opts.skip?.(p)) continue;
      const abs = join(root, p);
      const st = await lstat(abs);
      if (st.isDirectory()) {
        files.push({ path: p, type: "directory", mode: (st.mode & 0o777) | 0o700 });
        await walk(p);
      } else if (st.isSymbolicLink()) {
        files.push({ path: p, type: "symlink", mode: 0o777, linkname: await readlink(abs) });
      } else if (st.isFile()) {
        total += st.size;
        if (total > maxContent)
          throw new AgentdError(
            "ETOOLARGE",
            `workspace directory ${root} holds more than ${maxContent} bytes`,
          );
        files.push({ path: p, type: "file", mode: st.mode & 0o777, data: await readFile(abs) });
      }
    }
  };
  await walk("");
  checkLinks(files);
  return files;
}
