/**
 * Reads a small configuration file (a policy, an extended policy) whole, refusing what is
 * no such file: a directory, a device (/dev/zero never ends), a FIFO (it would block the
 * start), a symlink loop, or a file over `maxBytes`. Must never: block on a special file,
 * or read more than `maxBytes` + 1 bytes whatever the path names.
 */
import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";

/** Largest configuration file read by default: 1 MiB (a policy is a few KiB). */
export const MAX_CONFIG_BYTES = 1024 * 1024;

/** The file's text, or why it cannot be read (a sentence naming what it found). */
export function readSmallFile(
  path: string,
  maxBytes = MAX_CONFIG_BYTES,
): string | { error: string } {
  let fd: number;
  try {
    // O_NONBLOCK: opening a FIFO without a writer returns at once instead of waiting.
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === "ELOOP") return { error: "a symlink loop (ELOOP)" };
    return { error: `${e.code ?? "error"}: ${e.message}` };
  }
  try {
    const st = fstatSync(fd);
    if (st.isDirectory()) return { error: "a directory, not a file" };
    if (!st.isFile()) return { error: "not a regular file (a device, FIFO or socket)" };
    if (st.size > maxBytes) return { error: `${st.size} bytes, over the ${maxBytes}-byte limit` };
    const buf = Buffer.alloc(maxBytes + 1);
    let n = 0;
    for (;;) {
      const got = readSync(fd, buf, n, buf.length - n, null);
      if (got === 0) break;
      n += got;
      if (n > maxBytes) return { error: `over the ${maxBytes}-byte limit (it grew while read)` };
    }
    return buf.subarray(0, n).toString("utf8");
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return { error: `${e.code ?? "error"}: ${e.message}` };
  } finally {
    closeSync(fd);
  }
}
