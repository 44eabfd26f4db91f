/**
 * Text from the server (a prompt, a model message, a command, tool output, a file name, an
 * error: model-, tool-, repository- or user-controlled) made safe to print on a terminal,
 * escaped rather than dropped so that a person sees something was there: every character
 * of internal/text/hidden-chars.ts (C0 controls but tab and newline, DEL, C1 controls, ESC,
 * bidi controls, zero-width and other invisible characters, look-alike spaces) is written
 * as `\x1b`, `\x9b`, `\u202e`, `\u{e0041}`. ESC-introduced sequences (CSI, OSC, DCS, APC,
 * PM, SOS, whatever their terminator) are thereby inert: their introducer is text.
 *
 * Must never: let one of those characters through, or touch any other character (a value
 * without them is printed byte for byte).
 */
import { HIDDEN_CHARS, HIDDEN_CHARS_SOURCE } from "../text/hidden-chars.ts";

/** What escapeControls escapes (tab and newline stay: they lay out the text). */
export const UNSAFE_CHARS = HIDDEN_CHARS;

/** UNSAFE_CHARS's source; build with the `u` flag. */
export const UNSAFE_SOURCE = HIDDEN_CHARS_SOURCE;

/** `\xNN` below U+0100, `\uNNNN` in the BMP, else `\u{NNNNN}`. */
export function escapeChar(c: string): string {
  const n = c.codePointAt(0) ?? 0;
  if (n < 0x100) return `\\x${n.toString(16).padStart(2, "0")}`;
  if (n < 0x10000) return `\\u${n.toString(16).padStart(4, "0")}`;
  return `\\u{${n.toString(16)}}`;
}

/** `s` with every unsafe character written as an escape (`\x1b`, `\x9b`, `\u202e`). */
export function escapeControls(s: string): string {
  return s.replace(UNSAFE_CHARS, escapeChar);
}

/**
 * Multi-line text to show as lines (tool output, a model message, a diff): a CRLF line end
 * is a line end, every other unsafe character is escaped (a lone CR too: it would move the
 * cursor back over the line).
 */
export function escapeText(s: string): string {
  return escapeControls(s.replace(/\r\n/g, "\n"));
}
