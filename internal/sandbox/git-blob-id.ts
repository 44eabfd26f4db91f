/**
 * Git object ids of blobs: sha1("blob <size>\0" + content), the id `git hash-object` prints.
 * The patch's `index` lines need them (git apply checks a binary patch's pre- and postimage
 * against them). Streaming: a blob of any size is hashed without holding it.
 */
import { createHash, type Hash } from "node:crypto";

/** The id git writes for "no file" (the old side of a creation, the new side of a deletion). */
export const NULL_BLOB_ID = "0".repeat(40);

/** An incremental blob hasher; `size` must be the exact number of bytes that will be fed. */
export function createBlobHasher(size: number): Hash {
  return createHash("sha1").update(`blob ${size}\0`, "latin1");
}

/** The git blob id of `data`. */
export function blobId(data: Uint8Array): string {
  return createBlobHasher(data.byteLength).update(data).digest("hex");
}
