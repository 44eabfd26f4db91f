/**
 * The literal forms of a secret value that redaction looks for: each a string matched as
 * it stands, with or without regard to case. Forms that need the text's structure (hex
 * dumps over several lines) are not here: see redaction-hex-dump.ts.
 *
 * This module only computes strings from a value; it must never log or keep a value.
 */

/** Values shorter than this are not redacted: "abc" or "1" would hit all over ordinary output. */
export const MIN_SECRET_LENGTH = 4;

/** One literal form of a value. */
export interface SecretForm {
  /** The text to find. */
  text: string;
  /**
   * Matched by a regex with the `i` flag (without `u`): ASCII letters in either case, other
   * letters by their simple upper-case mapping; never a length-changing mapping (ß, SS).
   */
  caseInsensitive: boolean;
}

/**
 * Every literal form of `value` (none when it is shorter than MIN_SECRET_LENGTH):
 *
 * - in any case (`tr a-z A-Z`, `.upper()`): the value; reversed by code points (`rev` in a
 *   UTF-8 locale); reversed by bytes and decoded as UTF-8 with U+FFFD for broken sequences
 *   (busybox `rev`, which reverses bytes), when that keeps MIN_SECRET_LENGTH characters
 *   that are not U+FFFD; JSON-escaped (see `jsonForms`); URL-encoded (encodeURIComponent,
 *   form encoding with "+"; Python's `quote`, `quote_plus` and RFC 3986 strict, see
 *   `percentForms`); hexadecimal of the UTF-8 bytes, plain (`xxd -p` on one line) or with
 *   a separator between bytes (see `hexForms`);
 * - exactly: base64 of the UTF-8 bytes (see `base64Forms`).
 */
export function secretForms(value: string): SecretForm[] {
  if (value.length < MIN_SECRET_LENGTH) return [];
  const utf8 = Buffer.from(value, "utf8");
  const folded = new Set<string>([value, [...value].reverse().join("")]);
  const byteReversed = Buffer.from(utf8).reverse().toString("utf8");
  if (byteReversed.replaceAll("\uFFFD", "").length >= MIN_SECRET_LENGTH) folded.add(byteReversed);
  for (const json of jsonForms(value)) folded.add(json);
  try {
    const uri = encodeURIComponent(value);
    folded.add(uri);
    folded.add(uri.replaceAll("%20", "+"));
  } catch {
    // A lone surrogate is not URI-encodable; the form encoding below still is.
  }
  folded.add(new URLSearchParams([["", value]]).toString().slice(1));
  for (const encoded of percentForms(utf8)) folded.add(encoded);
  for (const hex of hexForms(utf8)) folded.add(hex);
  const forms: SecretForm[] = [];
  for (const text of folded) {
    if (text.length >= MIN_SECRET_LENGTH) forms.push({ text, caseInsensitive: true });
  }
  for (const text of base64Forms(utf8)) {
    if (!folded.has(text)) forms.push({ text, caseInsensitive: false });
  }
  return forms;
}

/**
 * `value` JSON-escaped as common encoders print it: JavaScript (`JSON.stringify`), Python
 * (`json.dumps`: non-ASCII as \uXXXX), PHP (`json_encode`: that and "/" as "\/"), Go
 * (`json.Marshal`: <, > and & as \u003c, \u003e, \u0026), and "/" as "\/" alone.
 */
function jsonForms(value: string): string[] {
  const json = JSON.stringify(value).slice(1, -1);
  const ascii = json.replace(/[\u0080-\uffff]/g, (c) => `\\u${hex4(c)}`);
  return [
    json,
    json.replaceAll("/", "\\/"),
    ascii,
    ascii.replaceAll("/", "\\/"),
    json.replace(/[<>&\u2028\u2029]/g, (c) => `\\u${hex4(c)}`),
  ];
}

/** Bytes every percent-encoder below leaves as they are (RFC 3986 unreserved). */
const UNRESERVED = /[A-Za-z0-9_.~-]/;

/**
 * `bytes` percent-encoded with other safe sets than encodeURIComponent's: Python's
 * `urllib.parse.quote` ("/" kept), `quote_plus` (space as "+", "/" encoded) and strict
 * RFC 3986 (`!'()*` encoded too).
 */
function percentForms(bytes: Uint8Array): string[] {
  const encode = (keep: (c: string) => boolean, space: string) =>
    [...bytes]
      .map((b) => {
        const c = String.fromCharCode(b);
        if (b < 0x80 && (UNRESERVED.test(c) || keep(c))) return c;
        if (c === " " && space !== "") return space;
        return `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
      })
      .join("");
  return [encode((c) => c === "/", ""), encode(() => false, "+"), encode(() => false, "")];
}

/**
 * The UTF-8 bytes of a value in hexadecimal: plain (`xxd -p`), and with a separator between
 * bytes — a space (`<Buffer 73 65 63>` of Node, `od -An -tx1` on one line), ":" (Python's
 * `bytes.hex(":")`, openssl fingerprints), "-" (.NET's BitConverter) — or "\x" / "0x"
 * before each byte (escaped strings, C arrays without spaces are rare, so "0x" with ", ").
 */
function hexForms(bytes: Uint8Array): string[] {
  const pairs = [...bytes].map((b) => b.toString(16).padStart(2, "0"));
  return [
    pairs.join(""),
    pairs.join(" "),
    pairs.join(":"),
    pairs.join("-"),
    pairs.map((p) => `\\x${p}`).join(""),
    pairs.map((p) => `0x${p}`).join(", "),
  ];
}

function hex4(c: string): string {
  return c.charCodeAt(0).toString(16).padStart(4, "0");
}

/**
 * The base64 forms of `bytes`: whole (standard and URL-safe, padded and not), and the
 * stable inner part for each alignment. Inside a longer blob the value starts at byte
 * offset 0, 1 or 2 of a 3-byte group; encode it after that many filler bytes, drop the
 * leading characters that also carry filler bits (0, 2 or 3 of them) and, when the value
 * does not end on a group boundary, the last character, which also carries bits of
 * whatever follows. What is left is the same whatever surrounds the value (the approach of
 * Sigma's base64offset modifier; GitHub's runner masks the trimmed forms for the same reason).
 * Forms shorter than MIN_SECRET_LENGTH are left out.
 */
export function base64Forms(bytes: Uint8Array): string[] {
  const out = new Set<string>();
  const std = Buffer.from(bytes).toString("base64");
  out.add(std);
  out.add(std.replace(/=+$/, ""));
  const url = Buffer.from(bytes).toString("base64url");
  out.add(url);
  out.add(url + "=".repeat((4 - (url.length % 4)) % 4));
  const dropStart = [0, 2, 3];
  for (let offset = 0; offset < 3; offset++) {
    const shifted = Buffer.concat([Buffer.alloc(offset), bytes]);
    let inner = shifted.toString("base64").replace(/=+$/, "").slice(dropStart[offset]);
    if (shifted.length % 3 !== 0) inner = inner.slice(0, -1);
    out.add(inner);
    out.add(inner.replaceAll("+", "-").replaceAll("/", "_"));
  }
  return [...out].filter((f) => f.length >= MIN_SECRET_LENGTH);
}

/** `s` with every regex syntax character escaped (valid without the `u` flag). */
export function escapeRegex(s: string): string {
  return s.replace(/[\\^$.*+?()[\]{}|/-]/g, "\\$&");
}
