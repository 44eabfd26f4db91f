/**
 * Workspace archives in memory: validates an uploaded tar (or tar.gz) into a list of files,
 * packs such lists into the one form a sandbox accepts, and reads a dev-mode host directory
 * into the same form. The rules are workspace-rules.ts; archives that may be large go
 * through workspace-stream.ts instead, which never holds them whole. Nothing here writes
 * to disk, and a bad archive is refused whole (tar-slip, absolute paths, devices, links
 * out of the tree, size limits).
 */
import { lstat, readdir, readFile, readlink } from "node:fs/promises";
import { join } from "node:path";
import * as tar from "tar-stream";
import { AgentdError } from "../errors.ts";
import { type ArchiveLimits, checkLinkTarget, type EntryMeta } from "./workspace-rules.ts";
import {
  normalisedHeader,
  normaliseWorkspaceStream,
  readArchiveEntries,
} from "./workspace-stream.ts";

export type { ArchiveLimits } from "./workspace-rules.ts";
export { normaliseEntryPath, SANDBOX_EXPORT_LIMITS, SANDBOX_UID } from "./workspace-rules.ts";

/** One file of a workspace, in memory. */
export interface WorkspaceFile extends EntryMeta {
  /** File content (files only). */
  data?: Buffer;
}

/**
 * Parses and checks an archive (tar or gzip-compressed tar) into its files, in archive
 * order; directories the archive implies but does not list are not returned.
 */
export async function readWorkspaceArchive(
  data: Uint8Array,
  limits: ArchiveLimits = {},
): Promise<WorkspaceFile[]> {
  const files: WorkspaceFile[] = [];
  for await (const e of readArchiveEntries([data], limits)) {
    if (e.implicit === true) continue;
    const { content, size: _size, implicit: _implicit, mtime: _mtime, ...meta } = e;
    if (e.type !== "file") {
      files.push(meta);
      continue;
    }
    const chunks: Uint8Array[] = [];
    for await (const c of content) chunks.push(c);
    files.push({ ...meta, data: Buffer.concat(chunks) });
  }
  return files;
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
  const dirs = new Set<string>();
  const ensureParents = (p: string): void => {
    const parts = p.split("/");
    for (let i = 1; i < parts.length; i++) {
      const d = parts.slice(0, i).join("/");
      if (!dirs.has(d)) {
        dirs.add(d);
        pack.entry(normalisedHeader({ path: d, type: "directory", mode: 0o755 }, 0));
      }
    }
  };
  for (const f of files) {
    ensureParents(f.path);
    if (f.type === "directory") {
      if (dirs.has(f.path)) continue;
      dirs.add(f.path);
    }
    const data = f.data ?? Buffer.alloc(0);
    if (f.type === "file") pack.entry(normalisedHeader(f, data.byteLength), data);
    else pack.entry(normalisedHeader(f, 0));
  }
  pack.finalize();
  await ended;
  return Buffer.concat(out);
}

/** Validates an archive and returns its normalised tar (see normaliseWorkspaceStream). */
export async function normaliseWorkspaceArchive(
  data: Uint8Array,
  limits: ArchiveLimits = {},
): Promise<Buffer> {
  const out: Uint8Array[] = [];
  for await (const chunk of normaliseWorkspaceStream([data], limits)) out.push(chunk);
  return Buffer.concat(out);
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
        const linkname = await readlink(abs);
        checkLinkTarget(p, linkname);
        files.push({ path: p, type: "symlink", mode: 0o777, linkname });
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
  return files;
}
