/**
 * Reading the files of an archive that may be hostile: only regular files, never through a
 * symbolic link (O_NOFOLLOW), never more bytes than a limit or than the manifest says, each
 * hashed while read. Errors are ArchiveErrors naming the file and what is wrong with it.
 * Must never: open a path that is not inside the archive directory, or read unbounded input.
 */
import { createHash } from "node:crypto";
import { constants } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import { open } from "node:fs/promises";
import { join } from "node:path";
import { AgentdError } from "../errors.ts";

/** A hostile or damaged archive: `file` (relative to the archive) and what is wrong. */
export class ArchiveError extends AgentdError {
  readonly archive: string;
  readonly file: string;
  constructor(archive: string, file: string, problem: string) {
    super("EIO", `archive ${archive}: ${file}: ${problem}`);
    this.archive = archive;
    this.file = file;
  }
}

const CHUNK = 1024 * 1024;

/** Opens `rel` inside `dir` for reading: a regular file, not a symlink; returns it and its size. */
export async function openRegular(
  dir: string,
  rel: string,
): Promise<{ fh: FileHandle; size: number }> {
  let fh: FileHandle;
  try {
    fh = await open(join(dir, rel), constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ELOOP") throw new ArchiveError(dir, rel, "is a symbolic link");
    if (code === "ENOENT") throw new ArchiveError(dir, rel, "is missing");
    throw new ArchiveError(dir, rel, `cannot be opened (${code ?? String(err)})`);
  }
  const st = await fh.stat();
  if (!st.isFile()) {
    await fh.close();
    throw new ArchiveError(dir, rel, "is not a regular file");
  }
  return { fh, size: st.size };
}

/**
 * Reads `rel` whole, checking it holds exactly `want.size` bytes (at most `max`) with sha256
 * `want.sha256` when given. Returns the bytes when `keep`, else an empty buffer.
 */
export async function readChecked(
  dir: string,
  rel: string,
  want: { size?: number; sha256?: string; max: number; keep: boolean },
): Promise<Buffer> {
  const { fh, size } = await openRegular(dir, rel);
  try {
    if (size > want.max)
      throw new ArchiveError(dir, rel, `${size} bytes is over the limit of ${want.max}`);
    if (want.size !== undefined && size !== want.size)
      throw new ArchiveError(dir, rel, `holds ${size} bytes but the manifest says ${want.size}`);
    const sha = createHash("sha256");
    const kept: Buffer[] = [];
    const buf = Buffer.alloc(Math.min(CHUNK, Math.max(size, 1)));
    let total = 0;
    // Read at most size + 1 bytes: a file that grows while read is caught, never read on.
    while (total <= size) {
      const { bytesRead } = await fh.read(buf, 0, Math.min(buf.length, size + 1 - total), null);
      if (bytesRead === 0) break;
      total += bytesRead;
      const part = buf.subarray(0, bytesRead);
      sha.update(part);
      if (want.keep) kept.push(Buffer.from(part));
    }
    if (total !== size) throw new ArchiveError(dir, rel, "changed size while it was read");
    const got = sha.digest("hex");
    if (want.sha256 !== undefined && got !== want.sha256)
      throw new ArchiveError(dir, rel, `sha256 is ${got} but the manifest says ${want.sha256}`);
    return Buffer.concat(kept);
  } finally {
    await fh.close();
  }
}
