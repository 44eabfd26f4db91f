/**
 * Text an approver must read exactly as it will run: each argument quoted as a shell would
 * need it (so `sh -c "a b"` and `sh -c a b` look different), and characters that hide or
 * reorder text (controls, zero-width, bidi overrides) shown as \u{…} escapes. Never:
 * shorten or normalise what is shown.
 */
const HIDDEN =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: these characters are what it finds
  /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]/gu;

/** Hidden characters made visible. */
export function visible(text: string): string {
  return text.replace(HIDDEN, (c) => `\\u{${(c.codePointAt(0) ?? 0).toString(16)}}`);
}

/** One argument as a POSIX shell would need it written. */
export function shellQuote(arg: string): string {
  if (/^[A-Za-z0-9_\-./=:,+@%]+$/.test(arg)) return arg;
  return `'${arg.replaceAll("'", `'\\''`)}'`;
}

/** argv as one line a person can read and trust. */
export function shownCommand(argv: readonly string[]): string {
  return argv.map((a) => visible(shellQuote(a))).join(" ");
}
