/**
 * ArtifactStore: content-addressed blobs (sha256). Large content lives here; events carry
 * the digest. A stored blob never changes: its name is its hash, and a reader never sees
 * a partial one. A store must never hold a whole streamed blob in memory.
 */
export interface ArtifactInfo {
  /** sha256 of the content, lowercase hex. */
  digest: string;
  size: number;
}

/** Options of {@link ArtifactStore.putStream}. */
export interface PutStreamOptions {
  /**
   * Largest blob accepted, bytes. Past it the write stops with ETOOLARGE naming the limit,
   * and nothing is stored. Default: no limit.
   */
  maxBytes?: number;
  /** Stops the write (nothing is stored) and rejects with the signal's reason. */
  signal?: AbortSignal;
}

export interface ArtifactStore {
  /** Stores `data`; storing the same content twice is a no-op. */
  put(data: Uint8Array): Promise<ArtifactInfo>;
  /**
   * Stores the bytes `source` yields, hashing them while they are written, so memory stays
   * bounded by a chunk whatever the blob's size. The blob appears under its digest only
   * once complete and durable; when `source` throws, the limit is passed or the signal
   * aborts, nothing is left behind and the source's error (or ETOOLARGE, or the abort
   * reason) is thrown as it is. Storing the same content twice is a no-op.
   */
  putStream(source: AsyncIterable<Uint8Array>, opts?: PutStreamOptions): Promise<ArtifactInfo>;
  /** Size of a stored blob, or undefined when absent. */
  stat(digest: string): Promise<ArtifactInfo | undefined>;
  /** The content in chunks of at most `chunkSize` bytes. Throws ENOTFOUND when absent. */
  read(digest: string, chunkSize?: number): AsyncIterable<Uint8Array>;
  /**
   * Removes a blob (a deletion found no run referencing it: lifecycle/delete-run.ts).
   * True when it was there. Absent on stores that cannot delete.
   */
  delete?(digest: string): Promise<boolean>;
}

export const DIGEST_RE = /^[0-9a-f]{64}$/;
