/**
 * The characters a person must never be shown raw, because a terminal acts on them or a
 * screen hides or reorders them: C0 controls (tab and newline aside: they are layout), DEL
 * and the C1 controls (ESC and the 8-bit CSI/OSC/DCS/SOS/PM/APC introducers among them), every
 * Unicode format character (bidi embeddings, overrides and isolates U+202A–202E,
 * U+2066–2069, the marks U+200E/200F/061C, zero-width U+200B–200D, U+2060–2064, U+FEFF,
 * soft hyphen, tag characters U+E0000–E007F), line and paragraph separators, variation
 * selectors, fillers that draw as nothing (Hangul fillers, U+2800, the combining grapheme
 * joiner) and the spaces that look like U+0020 but are not one (no-break, em, thin…: a
 * shell does not split a word on them).
 *
 * One definition for agentctl (internal/cli/terminal-safe.ts) and the web console
 * (internal/console/src/shown-text.ts). Must never: match a printable character a person
 * reads as itself (letters, digits, punctuation, U+0020, box drawing, the Braille spinner).
 */

/** The class's source (for a `u`-flagged RegExp). Tab and newline are not in it. */
export const HIDDEN_CHARS_SOURCE =
  "[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f\\p{Cf}\\p{Zl}\\p{Zp}" +
  "\\u00a0\\u034f\\u115f\\u1160\\u1680\\u17b4\\u17b5\\u180b-\\u180f\\u2000-\\u200a\\u202f\\u205f" +
  "\\u2800\\u3000\\u3164\\uffa0\\ufe00-\\ufe0f\\u{e0100}-\\u{e01ef}]";

/** Every hidden character (global: for replace). */
export const HIDDEN_CHARS = new RegExp(HIDDEN_CHARS_SOURCE, "gu");

/** True when `s` holds a hidden character. */
export function hasHiddenChar(s: string): boolean {
  return new RegExp(HIDDEN_CHARS_SOURCE, "u").test(s);
}
