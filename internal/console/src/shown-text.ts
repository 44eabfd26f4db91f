/**
 * Text an approver must read exactly as it will run: a command's line as the kernel will run
 * it (separators, redirections and quotes kept: `a; b` never shows as `a b`), each argument
 * of an argv quoted as a shell would need it (so `sh -c "a b"` and `sh -c a b` look
 * different), and characters that hide or reorder text (controls, zero-width, bidi
 * controls, look-alike spaces: internal/text/hidden-chars.ts, with tab and newline) shown
 * as \u{…} escapes. Never: shorten or normalise what is shown.
 */
import { HIDDEN_CHARS_SOURCE } from "../../text/hidden-chars.ts";

const HIDDEN = new RegExp(`[\\t\\n]|${HIDDEN_CHARS_SOURCE}`, "gu");

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

/**
 * The exact command line of a command's preview, from the kernel's summary
 * `run "LINE" in CWD` (LINE as JSON, redacted as the kernel shows it); undefined for any
 * other summary (then only the argv is known, and it is shown as words, not as a line).
 */
export function commandLine(summary: string): string | undefined {
  const m = /^run ("(?:[^"\\]|\\.)*") in /s.exec(summary);
  if (m === null) return undefined;
  try {
    const line: unknown = JSON.parse(m[1] as string);
    return typeof line === "string" ? line : undefined;
  } catch {
    return undefined;
  }
}

const HIDDEN_IN_LAYOUT = new RegExp(HIDDEN_CHARS_SOURCE, "gu");

/** Hidden characters made visible, tab and newline kept (multi-line text: output, a diff). */
export function visibleText(text: string): string {
  return text.replace(HIDDEN_IN_LAYOUT, (c) => `\\u{${(c.codePointAt(0) ?? 0).toString(16)}}`);
}

/** The command rows of an approval card, each text already made visible. */
export interface CommandFacts {
  /** The line exactly as it will run; undefined when the preview does not say it. */
  line: string | undefined;
  /** The line's words, each quoted (never presented as the line: it drops `;`, `|`, `>`). */
  words: string;
  cwd: string;
}

/** What the card shows of a command's preview; undefined for a preview of no command. */
export function commandFacts(p: {
  summary: string;
  argv: readonly string[];
  cwd: string;
}): CommandFacts | undefined {
  if (p.argv.length === 0) return undefined;
  const line = commandLine(p.summary);
  return {
    line: line === undefined ? undefined : visible(line),
    words: shownCommand(p.argv),
    cwd: visible(p.cwd),
  };
}
