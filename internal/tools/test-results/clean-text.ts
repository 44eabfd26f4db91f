/**
 * Text from a test's output made safe to show and to store: terminal escapes (CSI, OSC and
 * lone ESC sequences) and control characters other than newline and tab removed, cut to a
 * length. Must never: return a string longer than asked or with a C0/C1 control character
 * (save \n and \t, and none at all with `oneLine`).
 */

// CSI and OSC sequences, other ESC sequences, 8-bit CSI.
// biome-ignore lint/suspicious/noControlCharactersInRegex: escapes are what it removes
const CSI = /\x1b\[[0-?]*[ -/]*[@-~]|\x9b[0-?]*[ -/]*[@-~]/g;
// biome-ignore lint/suspicious/noControlCharactersInRegex: escapes are what it removes
const OSC = /\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?/g;
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it removes
const CONTROLS = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;

const noEscapes = (s: string) => s.replace(CSI, "").replace(OSC, "");

/** `s` without escapes and control characters, at most `max` characters (an ellipsis marks a cut). */
export function cleanText(s: string, max: number, oneLine: boolean): string {
  let t = noEscapes(s).replace(/\r\n?/g, "\n").replace(CONTROLS, "");
  if (oneLine) t = t.replace(/\s+/g, " ");
  t = t.trim();
  return t.length > max ? `${t.slice(0, Math.max(0, max - 1))}…` : t;
}

/** `s` without terminal escapes, for parsing (line structure kept). */
export function stripEscapes(s: string): string {
  return noEscapes(s).replace(/\r\n?/g, "\n");
}
