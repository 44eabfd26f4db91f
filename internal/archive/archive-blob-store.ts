/**
 * A read-only ArtifactStore over one verified archive's blobs (`blobs/<sha256>`), for
 * GetArtifact of an archived run. Reads only names the archive's manifest lists (digests),
 * never through a symlink, and checks the size again as it reads.
 * Must never: write, or open a name that is not a listed digest.
 */

import type { ArtifactInfo, ArtifactStore } from "../artifacts/port.ts";
import { DIGEST_RE } from "../artifacts/port.ts";
import { AgentdError } from "../errors.ts";
import { archivedReadOnly } from "./archive-fallback-log.ts";
import { ArchiveError, openRegular } from "./archive-files.ts";
import { blobPath } from "./layout.ts";
import type { OpenedArchive } from "./open-archive.ts";

export class ArchiveBlobStore implements ArtifactStore {
  readonly #a: OpenedArchive;

  constructor(archive: OpenedArchive) {
    this.#a = archive;
  }

  put(): Promise<ArtifactInfo> {
    return Promise.reject(archivedReadOnly(this.#a.manifest.runId, "storing an artifact"));
  }

  putStream(): Promise<ArtifactInfo> {
    return this.put();
  }

  async stat(digest: string): Promise<ArtifactInfo | undefined> {
    const size = DIGEST_RE.test(digest) ? this.#a.blobSize(digest) : undefined;
    return size === undefined ? undefined : { digest, size };
  }

  async *read(digest: string, chunkSize = 64 * 1024): AsyncIterable<Uint8Array> {
    const want = await this.stat(digest);
    if (want === undefined)
      throw new AgentdError("ENOTFOUND", `artifact ${digest} is not in the run's archive`);
    const rel = blobPath(digest);
    const { fh, size } = await openRegular(this.#a.dir, rel);
    try {
      if (size !== want.size)
        throw new ArchiveError(
          this.#a.dir,
          rel,
          `holds ${size} bytes but the manifest says ${want.size}`,
        );
      let left = size;
      while (left > 0) {
        const buf = Buffer.alloc(Math.min(chunkSize, left));
        const { bytesRead } = await fh.read(buf, 0, buf.length, null);
        if (bytesRead === 0) throw new ArchiveError(this.#a.dir, rel, "shrank while it was read");
        left -= bytesRead;
        yield buf.subarray(0, bytesRead);
      }
    } finally {
      await fh.close();
    }
  }
}
