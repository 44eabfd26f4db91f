/**
 * Terminal styling for agentctl: colors when wanted, nothing otherwise. A color is a mark
 * (own-style.ts), made an SGR sequence by the terminal output only after everything else in
 * the text is escaped: a Style's output must be written through a TerminalOut
 * (terminal-out.ts), which is agentctl's only way to its stdout and stderr.
 */
import { stripMarks, styleMark } from "./own-style.ts";
import { escapeControls } from "./terminal-safe.ts";

export interface Style {
  bold(s: string): string;
  dim(s: string): string;
  red(s: string): string;
  green(s: string): string;
  yellow(s: string): string;
  magenta(s: string): string;
  cyan(s: string): string;
}

function wrap(on: boolean, open: number, close: number): (s: string) => string {
  if (!on) return (s) => s;
  const [o, c] = [styleMark(open), styleMark(close)];
  return (s) => (s === "" ? s : `${o}${s}${c}`);
}

export function makeStyle(enabled: boolean): Style {
  return {
    bold: wrap(enabled, 1, 22),
    dim: wrap(enabled, 2, 22),
    red: wrap(enabled, 31, 39),
    green: wrap(enabled, 32, 39),
    yellow: wrap(enabled, 33, 39),
    magenta: wrap(enabled, 35, 39),
    cyan: wrap(enabled, 36, 39),
  };
}

/**
 * Colors on a terminal unless NO_COLOR is set or TERM is dumb; FORCE_COLOR (not "0") turns
 * them on anywhere.
 */
export function wantColor(isTTY: boolean, env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== "" && env.FORCE_COLOR !== "0")
    return true;
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== "") return false;
  if (env.TERM === "dumb") return false;
  return isTTY;
}

/** Removes agentctl's color marks and ANSI escape sequences (for width calculations). */
export function stripAnsi(s: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI escapes start with ESC
  return stripMarks(s).replace(/\x1b\[[0-9;?]*[A-Za-z]/g, "");
}

/** "1.2 s", "340 ms", "2m05s", "1h02m". */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(Math.floor(s % 60)).padStart(2, "0")}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, "0")}m`;
}

/** Integer millionths of a dollar as "$0.0123". */
export function formatCost(micros: bigint | number): string {
  const n = Number(micros) / 1_000_000;
  if (n > 0 && n < 0.0001) return "<$0.0001";
  return `$${n < 1 ? n.toFixed(4) : n.toFixed(2)}`;
}

/** 1234567 → "1,234,567". */
export function formatCount(n: bigint | number): string {
  return Number(n).toLocaleString("en-US");
}

/**
 * A string cut to `max` characters with an ellipsis, newlines shown as ⏎, every other
 * unsafe character escaped (terminal-safe.ts: `\x1b]0;…\x07`, `\u202e`): a field's text (a
 * file name, a prompt, an error) never drives the terminal, and a person sees that
 * something was there.
 */
export function oneLine(s: string, max: number): string {
  const flat = escapeControls(s.replace(/\r?\n/g, " ⏎ "))
    .replace(/[\t ]+/g, " ")
    .trim();
  return flat.length > max ? `${flat.slice(0, Math.max(0, max - 1))}…` : flat;
}

/** 1 → "1st", 2 → "2nd", 11 → "11th". */
export function ordinal(n: number): string {
  const t = n % 100;
  if (t >= 11 && t <= 13) return `${n}th`;
  return `${n}${["th", "st", "nd", "rd"][n % 10] ?? "th"}`;
}
