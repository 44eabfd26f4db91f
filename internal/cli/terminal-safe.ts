/**
 * Text from the server (a prompt, a summary, an error, a label: model- or user-controlled)
 * made safe to print on a terminal as it is, escaped rather than dropped: C0 controls but
 * tab and newline, DEL, C1 controls (8-bit CSI/OSC among them), ESC, and the Unicode
 * line/paragraph separators and bidirectional overrides (text that reads differently than
 * it is). Used where values are printed raw (`-o name`, `-o jsonpath=…`); style.ts's
 * oneLine() flattens text for the human tables instead.
 *
 * Must never: let one of those characters through, or touch any other character (a value
 * without them is printed byte for byte).
 */

/** What escapeControls escapes (tab and newline stay: they lay out the user's template). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it escapes
export const UNSAFE_CHARS = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** `\xNN` below U+0100, else `\uNNNN`. */
export function escapeChar(c: string): string {
  const n = c.codePointAt(0) ?? 0;
  return n < 0x100
    ? `\\x${n.toString(16).padStart(2, "0")}`
    : `\\u${n.toString(16).padStart(4, "0")}`;
}

/** `s` with every unsafe character written as an escape (`\x1b`, `\x9b`, `\u202e`). */
export function escapeControls(s: string): string {
  return s.replace(UNSAFE_CHARS, escapeChar);
}
