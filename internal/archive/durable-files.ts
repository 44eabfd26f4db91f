/**
 * Small durable-write helpers of the archive writer: a file written, fsynced and closed
 * (created exclusively, never through a symlink), a directory fsynced.
 * Must never: follow a symbolic link or write over an existing file.
 */
import { createHash } from "node:crypto";
import { constants } from "node:fs";
import { open } from "node:fs/promises";

const CREATE = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/** What was written: size and sha256 of the bytes. */
export interface Written {
  size: number;
  sha256: string;
}

/** Writes the chunks of `source` to a new file `path`, fsyncs it, and returns size and sha256. */
export async function writeDurable(
  path: string,
  source: Iterable<Uint8Array | string> | AsyncIterable<Uint8Array | string>,
): Promise<Written> {
  const fh = await open(path, CREATE, 0o644);
  const sha = createHash("sha256");
  let size = 0;
  try {
    for await (const chunk of source) {
      const bytes = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      sha.update(bytes);
      size += bytes.byteLength;
      await fh.write(bytes);
    }
    await fh.sync();
  } finally {
    await fh.close();
  }
  return { size, sha256: sha.digest("hex") };
}

/** fsyncs a directory, so the names created in it survive a crash. */
export async function syncDir(path: string): Promise<void> {
  const fh = await open(path, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
