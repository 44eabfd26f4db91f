/**
 * agentctl's only way to its stdout and stderr: every string written through a
 * TerminalOut has each unsafe character escaped (terminal-safe.ts), whichever command,
 * format or error path produced it, so that no text a model, a tool or a repository wrote
 * can move the cursor, clear the screen, set the clipboard (OSC 52), retitle the window,
 * link, or reorder and hide what the approver reads.
 *
 * Two things pass as they are: agentctl's own colors (the exact SGR sequences style.ts
 * writes, only when colors are on; never conceal, reverse, cursor or erase codes), and what
 * is written through control() (the status line's own erase, which no server text reaches).
 * Bytes (writeBytes) go raw only to a file or pipe (an artifact kept byte for byte); to a
 * terminal they are decoded and escaped like text.
 *
 * Must never: pass an unsafe character of a string given to write(), whatever its source.
 */
import { escapeControls } from "./terminal-safe.ts";

/** The SGR sequences style.ts writes: bold, dim, red, green, yellow, magenta, cyan and their resets. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: ESC starts the sequences it keeps
const OWN_STYLE = /\x1b\[(?:1|2|22|31|32|33|35|36|39)m/g;

export interface TerminalOut {
  /** Text: unsafe characters escaped (agentctl's own colors kept when `style`). */
  write(s: string, done?: () => void): boolean;
  /** agentctl's own cursor control (the status line); never give it server text. */
  control(seq: string): void;
  /** Bytes kept as they are off a terminal (an artifact); escaped text on one. */
  writeBytes(b: Uint8Array): void;
  readonly isTTY: boolean;
  readonly columns: number;
}

/** `s` with every unsafe character escaped but the own-style SGR sequences when `style`. */
export function guardText(s: string, style: boolean): string {
  if (!style) return escapeControls(s);
  let out = "";
  let at = 0;
  for (const m of s.matchAll(OWN_STYLE)) {
    out += escapeControls(s.slice(at, m.index)) + m[0];
    at = m.index + m[0].length;
  }
  return out + escapeControls(s.slice(at));
}

/** A TerminalOut over `stream`; `style`: whether agentctl's colors are on for it. */
export function createTerminalOut(stream: NodeJS.WriteStream, style: boolean): TerminalOut {
  return {
    write: (s, done) => stream.write(guardText(s, style), done),
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
