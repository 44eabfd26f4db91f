/**
 * agentctl's own colors as marks no server text can forge: style.ts writes a mark where it
 * means an SGR sequence, and the terminal output (terminal-out.ts) escapes everything a
 * string holds first — raw SGR from a model included — then turns the marks into SGR. So
 * the escaping comes before agentctl's styling, whatever order a caller built the string
 * in, and a model message that writes `\x1b[32m✔ approved by admin` shows the escape, never
 * agentctl's green. A mark is C1 PU1 (U+0091), a random nonce drawn when the process
 * starts, the SGR code, C1 PU2 (U+0092): the two controls are escaped wherever they appear
 * in text (terminal-safe.ts), and the nonce is never printed or sent, so no text from the
 * server can hold a mark.
 *
 * Must never: turn into SGR anything but a mark with this process's nonce and one of the
 * codes style.ts writes; let the nonce reach an output or a request.
 */
import { randomBytes } from "node:crypto";

/** The SGR codes style.ts writes: bold, dim, normal intensity, red, green, yellow, magenta, cyan, default color. */
const OWN_CODES = new Set([1, 2, 22, 31, 32, 33, 35, 36, 39]);

const NONCE = randomBytes(12).toString("hex");

const MARK = new RegExp(`\\x91${NONCE}(\\d{1,2})\\x92`, "g");

/** The mark style.ts writes for SGR `code` (one of OWN_CODES). */
export function styleMark(code: number): string {
  if (!OWN_CODES.has(code)) throw new Error(`not one of agentctl's SGR codes: ${code}`);
  return `\x91${NONCE}${code}\x92`;
}

/**
 * `s` with every piece between marks passed through `escapeText`, and each mark made its SGR
 * sequence (`colors`) or removed.
 */
export function applyMarks(s: string, colors: boolean, escapeText: (t: string) => string): string {
  let out = "";
  let at = 0;
  for (const m of s.matchAll(MARK)) {
    out += escapeText(s.slice(at, m.index));
    out += colors ? `\x1b[${m[1]}m` : "";
    at = m.index + m[0].length;
  }
  return out + escapeText(s.slice(at));
}

/** `s` without marks (for widths and plain copies). */
export function stripMarks(s: string): string {
  return s.replace(MARK, "");
}
