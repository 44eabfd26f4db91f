/**
 * Git binary patches: the `GIT binary patch` / `literal <size>` hunk `git diff --binary`
 * writes, zlib-deflated and base85-encoded in lines of at most 52 bytes, each led by a
 * length character. Only the forward hunk is written (git apply needs no reverse hunk; it
 * would double the size and carry the old content). Never writes a `delta` hunk.
 */
import { promisify } from "node:util";
import { deflate } from "node:zlib";

const deflateAsync = promisify(deflate);

/** git's base85 alphabet (base85.c), not RFC 1924's order. */
const EN85 = Buffer.from(
  "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~",
  "latin1",
);
/** Bytes per line, as git writes them (a line is 1 + 65 characters). */
const LINE_BYTES = 52;

/** Writes the base85 of `data` at `out[at]` (git's encode_85); answers the next offset. */
function writeBase85(data: Uint8Array, out: Buffer, at: number): number {
  let o = at;
  for (let i = 0; i < data.length; i += 4) {
    // Big-endian groups of 4, the last one zero-padded, 5 characters each.
    let acc = (data[i] ?? 0) * 0x1000000 + ((data[i + 1] ?? 0) << 16);
    acc += ((data[i + 2] ?? 0) << 8) + (data[i + 3] ?? 0);
    for (let k = 4; k >= 0; k--) {
      out[o + k] = EN85[acc % 85] as number;
      acc = Math.floor(acc / 85);
    }
    o += 5;
  }
  return o;
}

/** Base85 as git's encode_85: each group of 4 bytes becomes 5 characters. */
export function encodeBase85(data: Uint8Array): string {
  const out = Buffer.allocUnsafe(Math.ceil(data.length / 4) * 5);
  writeBase85(data, out, 0);
  return out.toString("latin1");
}

/** The lines of a literal hunk: each `<length char><base85>\n`, A-Z for 1-26 bytes, a-z for 27-52. */
function encodeLines(z: Uint8Array): string {
  const full = Math.floor(z.length / LINE_BYTES);
  const rest = z.length % LINE_BYTES;
  const lineLen = (n: number): number => 2 + Math.ceil(n / 4) * 5;
  const out = Buffer.allocUnsafe(full * lineLen(LINE_BYTES) + (rest ? lineLen(rest) : 0));
  let o = 0;
  for (let i = 0; i < z.length; i += LINE_BYTES) {
    const chunk = z.subarray(i, i + LINE_BYTES);
    out[o++] = chunk.length <= 26 ? 0x40 + chunk.length : 0x60 + chunk.length - 26;
    o = writeBase85(chunk, out, o);
    out[o++] = 0x0a;
  }
  return out.toString("latin1");
}

/**
 * The body of a binary patch whose result is `data`: from "GIT binary patch" up to and
 * including the blank line that ends the hunk. Deflates off the main thread.
 */
export async function formatBinaryLiteral(data: Uint8Array): Promise<string> {
  const z = await deflateAsync(data);
  return `GIT binary patch\nliteral ${data.byteLength}\n${encodeLines(z)}\n`;
}
