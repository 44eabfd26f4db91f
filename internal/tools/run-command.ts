/**
 * Runs a shell command line (or, for process.run, an argv list without a shell) in the
 * sandbox for process.run, test.run and lint.run.
 */
import { z } from "zod";
import type { ExecResult } from "../sandbox/port.ts";
import { WORKSPACE } from "../sandbox/port.ts";
import { checkPath } from "./jail.ts";
import type { ToolContext } from "./tool.ts";

/** What every command-running tool returns. Non-zero exit codes are results, not errors. */
export interface CommandResult {
  command: string;
  cwd: string;
  exitCode: number;
  stdout: string;
  stderr: string;
  truncated: boolean;
  timedOut: boolean;
  oomKilled: boolean;
  durationMs: number;
}

export const timeoutField = z
  .number()
  .int()
  .min(100)
  .optional()
  .describe("Kill the command (its whole process group) after this many milliseconds");

/** exit 127 and the agent's word for a missing sh: the image has no shell. */
const NO_SHELL = /^agentd-agent: sh: No such file or directory/;

export async function runCommand(
  ctx: ToolContext,
  what: string | { argv: readonly string[] },
  cwd: string | undefined,
  timeoutMs: number | undefined,
  env: Record<string, string> = {},
): Promise<CommandResult> {
  const rel = cwd === undefined ? "" : checkPath("cwd", cwd, ctx.denyPatterns, true);
  const dir = rel === "" ? WORKSPACE : `${WORKSPACE}/${rel}`;
  const timeout = Math.min(timeoutMs ?? ctx.limits.defaultTimeoutMs, ctx.limits.maxTimeoutMs);
  // The cwd is entered by its physical path after the jail check of its name: a symlinked
  // directory leading out of /workspace is refused there too (cwdWithin).
  const command = typeof what === "string" ? what : argvLine(what.argv);
  const r: ExecResult = await ctx.sandbox.exec({
    argv: typeof what === "string" ? ["sh", "-c", what] : [...what.argv],
    cwd: dir,
    cwdWithin: WORKSPACE,
    timeoutMs: timeout,
    maxOutputBytes: ctx.limits.maxOutputBytes,
    env,
    ...(ctx.onOutput === undefined ? {} : { onOutput: ctx.onOutput }),
    ...(ctx.signal === undefined ? {} : { signal: ctx.signal }),
  });
  return {
    command,
    cwd: rel === "" ? "." : rel,
    exitCode: r.exitCode,
    stdout: r.stdout,
    stderr:
      typeof what === "string" && r.exitCode === 127 && NO_SHELL.test(r.stderr)
        ? `agentd: this sandbox's image has no shell (sh): give process.run an argv list (argv: ["program", "arg", …]) instead of a command line\n${r.stderr}`
        : r.stderr,
    truncated: r.truncated,
    timedOut: r.timedOut,
    oomKilled: r.oomKilled,
    durationMs: r.durationMs,
  };
}

/**
 * An argv list as the command line the kernel analyses (and people see): each word quoted,
 * so the line's words are exactly the argv.
 */
export function argvLine(argv: readonly string[]): string {
  return argv.map((a) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(a) ? a : shellQuote(a))).join(" ");
}

/** A value quoted for sh: single quotes, with embedded ones closed and escaped. */
export function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}
