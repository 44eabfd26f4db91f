/**
 * ArtifactStore on a local directory: `DIR/sha256/ab/abcdef…`. Blobs are written to a
 * temporary file under `DIR/tmp/`, hashed on the way, fsynced and renamed to their digest,
 * so a reader never sees a partial blob and a refused or failed write leaves nothing behind.
 * Never holds a streamed blob in memory, and never names a host path in an error message
 * (the path stays in the error's cause, for the logs).
 */
import { createHash, randomUUID } from "node:crypto";
import { createReadStream } from "node:fs";
import { type FileHandle, mkdir, open, readdir, rename, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { AgentdError, invalid } from "../errors.ts";
import { abortable } from "./abortable.ts";
import { type ArtifactInfo, type ArtifactStore, DIGEST_RE, type PutStreamOptions } from "./port.ts";

/**
 * Small chunks (a tar header is 512 bytes) are gathered up to this size before a write:
 * one syscall per 256 KiB instead of one per chunk, and a fixed bound on what is buffered.
 */
const WRITE_BATCH_BYTES = 256 * 1024;

export class FsArtifactStore implements ArtifactStore {
  readonly #dir: string;

  /** @param dir the store's root directory (created on first write). */
  constructor(dir: string) {
    this.#dir = dir;
  }

  #path(digest: string): string {
    if (!DIGEST_RE.test(digest)) throw invalid("digest", "must be 64 lowercase hex characters");
    return join(this.#dir, "sha256", digest.slice(0, 2), digest);
  }

  async put(data: Uint8Array): Promise<ArtifactInfo> {
    // The content is in memory already: its digest is known before anything is written.
    const digest = createHash("sha256").update(data).digest("hex");
    const existing = await this.stat(digest);
    if (existing !== undefined) return existing;
    return this.putStream([data]);
  }

  async putStream(
    source: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
    opts: PutStreamOptions = {},
  ): Promise<ArtifactInfo> {
    opts.signal?.throwIfAborted();
    const tmpDir = join(this.#dir, "tmp");
    const tmp = join(tmpDir, `${randomUUID()}.tmp`);
    let handle: FileHandle | undefined;
    try {
      handle = await storage(async () => {
        await mkdir(tmpDir, { recursive: true });
        return open(tmp, "wx", 0o644);
      });
      const written = await writeAll(handle, source, opts);
      await storage(async () => {
        await handle?.sync();
        await handle?.close();
      });
      handle = undefined;
      const path = this.#path(written.digest);
      await storage(async () => {
        await mkdir(join(this.#dir, "sha256", written.digest.slice(0, 2)), { recursive: true });
        // The same content stored twice renames onto identical bytes: a no-op for readers.
        await rename(tmp, path);
      });
      return written;
    } catch (err) {
      await handle?.close().catch(() => undefined);
      await rm(tmp, { force: true }).catch(() => undefined);
      throw err;
    }
  }

  async stat(digest: string): Promise<ArtifactInfo | undefined> {
    try {
      const st = await stat(this.#path(digest));
      return { digest, size: st.size };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw new AgentdError("EIO", "artifact store: cannot look up a blob", { cause: err });
    }
  }

  /**
   * Removes temporary files a killed process left under `DIR/tmp/`, once they are older
   * than `olderThanMs` (default an hour: another process sharing the directory may be
   * writing one right now). Returns how many went. Called at start.
   */
  async delete(digest: string): Promise<boolean> {
    const path = this.#path(digest);
    try {
      await stat(path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
      throw new AgentdError("EIO", "artifact store: cannot stat a blob", { cause: err });
    }
    await storage(() => rm(path, { force: true }));
    return true;
  }

  async sweepTemp(olderThanMs = 60 * 60_000, now = Date.now()): Promise<number> {
    const dir = join(this.#dir, "tmp");
    let names: string[];
    try {
      names = await readdir(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return 0;
      throw new AgentdError("EIO", "artifact store: cannot list its temporary files", {
        cause: err,
      });
    }
    let removed = 0;
    for (const name of names) {
      if (!name.endsWith(".tmp")) continue;
      const p = join(dir, name);
      const st = await stat(p).catch(() => undefined);
      if (st === undefined || now - st.mtimeMs < olderThanMs) continue;
      await rm(p, { force: true });
      removed++;
    }
    return removed;
  }

  async *read(digest: string, chunkSize = 64 * 1024): AsyncIterable<Uint8Array> {
    if ((await this.stat(digest)) === undefined) {
      throw new AgentdError("ENOTFOUND", `artifact ${digest} not found`);
    }
    for await (const chunk of createReadStream(this.#path(digest), { highWaterMark: chunkSize })) {
      yield chunk as Buffer;
    }
  }
}

/** Runs a filesystem step; its failure becomes EIO without the path (kept in the cause). */
async function storage<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === "ENOSPC" || code === "EDQUOT" ? "no space left" : "cannot write a blob";
    throw new AgentdError("EIO", `artifact store: ${why}`, { cause: err });
  }
}

/** Writes every chunk of `source` to `handle` in batches; returns the digest and size. */
async function writeAll(
  handle: FileHandle,
  source: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  opts: PutStreamOptions,
): Promise<ArtifactInfo> {
  const max = opts.maxBytes ?? Number.POSITIVE_INFINITY;
  const hash = createHash("sha256");
  const batch = Buffer.allocUnsafe(WRITE_BATCH_BYTES);
  let batched = 0;
  let size = 0;
  const flush = async (): Promise<void> => {
    if (batched === 0) return;
    const n = batched;
    batched = 0;
    await storage(() => handle.write(batch, 0, n));
  };
  for await (const chunk of abortable(source, opts.signal)) {
    size += chunk.byteLength;
    if (size > max) {
      throw new AgentdError("ETOOLARGE", `artifact exceeds the limit of ${max} bytes`);
    }
    hash.update(chunk);
    if (chunk.byteLength >= WRITE_BATCH_BYTES) {
      await flush();
      await storage(() => handle.write(chunk));
      continue;
    }
    if (batched + chunk.byteLength > WRITE_BATCH_BYTES) await flush();
    // Copied, not kept: a source may reuse its buffer once the next chunk is asked for.
    batch.set(chunk, batched);
    batched += chunk.byteLength;
  }
  await flush();
  return { digest: hash.digest("hex"), size };
}
