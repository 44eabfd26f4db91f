/**
 * agentctl's only way to its stdout and stderr: every string written through a
 * TerminalOut has each unsafe character escaped (terminal-safe.ts), whichever command,
 * format or error path produced it, so that no text a model, a tool or a repository wrote
 * can move the cursor, clear the screen, set the clipboard (OSC 52), retitle the window,
 * link, color itself, or reorder and hide what the approver reads.
 *
 * Escaping comes first, agentctl's styling after: every ESC in the text is escaped, SGR
 * sequences included (a model's `\x1b[32m` shows as text, never as agentctl's green); only
 * then are agentctl's own colors (the marks style.ts writes, own-style.ts) made SGR
 * sequences, when colors are on for the stream, or dropped. What is written through
 * control() (the status line's own erase, which no server text reaches) passes as it is.
 * Bytes (writeBytes) go raw only to a file or pipe (an artifact kept byte for byte); to a
 * terminal they are decoded and escaped like text.
 *
 * Must never: pass an unsafe character of a string given to write(), whatever its source,
 * nor an SGR sequence that is not one of agentctl's own marks.
 */
import { applyMarks } from "./own-style.ts";
import { escapeControls } from "./terminal-safe.ts";

export interface TerminalOut {
  /** Text: unsafe characters escaped, then agentctl's own colors applied (when `style`). */
  write(s: string, done?: () => void): boolean;
  /** `s` as write() would write it, for a writer that is not this one (readline's prompt). */
  guard(s: string): string;
  /** agentctl's own cursor control (the status line); never give it server text. */
  control(seq: string): void;
  /** Bytes kept as they are off a terminal (an artifact); escaped text on one. */
  writeBytes(b: Uint8Array): void;
  readonly isTTY: boolean;
  readonly columns: number;
}

/**
 * `s` as it may reach a terminal: every unsafe character escaped (raw SGR too), then
 * agentctl's own color marks made SGR sequences when `style`, else removed.
 */
export function guardText(s: string, style: boolean): string {
  return applyMarks(s, style, escapeControls);
}

/** A TerminalOut over `stream`; `style`: whether agentctl's colors are on for it. */
export function createTerminalOut(stream: NodeJS.WriteStream, style: boolean): TerminalOut {
  return {
    write: (s, done) => stream.write(guardText(s, style), done),
    guard: (s) => guardText(s, style),
    control: (seq) => {
      stream.write(seq);
    },
    writeBytes: (b) => {
      if (stream.isTTY === true) stream.write(escapeControls(Buffer.from(b).toString("utf8")));
      else stream.write(b);
    },
    get isTTY() {
      return stream.isTTY === true;
    },
    get columns() {
      return stream.columns;
    },
  };
}
