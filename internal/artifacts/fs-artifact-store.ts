/**
 * ArtifactStore on a local directory: `DIR/sha256/ab/abcdef…`. Written to a temporary
 * file, fsynced and renamed, so a reader never sees a partial blob.
 */
import { createHash, randomUUID } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, rename, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { AgentdError, invalid } from "../errors.ts";
import { type ArtifactInfo, type ArtifactStore, DIGEST_RE } from "./port.ts";

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
    const digest = createHash("sha256").update(data).digest("hex");
    const path = this.#path(digest);
    const existing = await this.stat(digest);
    if (existing !== undefined) return existing;
    await mkdir(join(this.#dir, "sha256", digest.slice(0, 2)), { recursive: true });
    const tmp = `${path}.${randomUUID()}.tmp`;
    try {
      await writeFile(tmp, data, { flush: true });
      await rename(tmp, path);
    } catch (err) {
      throw new AgentdError("EIO", `artifact store: cannot write ${digest}`, { cause: err });
    }
    return { digest, size: data.byteLength };
  }

  async stat(digest: string): Promise<ArtifactInfo | undefined> {
    try {
      const st = await stat(this.#path(digest));
      return { digest, size: st.size };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw err;
    }
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
