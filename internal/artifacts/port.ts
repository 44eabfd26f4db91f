/**
 * ArtifactStore: content-addressed blobs (sha256). Large content lives here; events carry
 * the digest. A stored blob never changes: its name is its hash.
 */
export interface ArtifactInfo {
  /** sha256 of the content, lowercase hex. */
  digest: string;
  size: number;
}

export interface ArtifactStore {
  /** Stores `data`; storing the same content twice is a no-op. */
  put(data: Uint8Array): Promise<ArtifactInfo>;
  /** Size of a stored blob, or undefined when absent. */
  stat(digest: string): Promise<ArtifactInfo | undefined>;
  /** The content in chunks of at most `chunkSize` bytes. Throws ENOTFOUND when absent. */
  read(digest: string, chunkSize?: number): AsyncIterable<Uint8Array>;
}

export const DIGEST_RE = /^[0-9a-f]{64}$/;
