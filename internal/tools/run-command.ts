/** Runs a shell command line in the sandbox for process.run, test.run and lint.run. */
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

export async function runCommand(
  ctx: ToolContext,
  command: string,
  cwd: string | undefined,
  timeoutMs: number | undefined,
  env: Record<string, string> = {},
): Promise<CommandResult> {
  const rel = cwd === undefined ? "" : checkPath("cwd", cwd, ctx.denyPatterns, true);
  const dir = rel === "" ? WORKSPACE : `${WORKSPACE}/${rel}`;
  const timeout = Math.min(timeoutMs ?? ctx.limits.defaultTimeoutMs, ctx.limits.maxTimeoutMs);
  // The cwd is entered by its physical path after the jail check of its name: a symlinked
  // directory leading out of /workspace is refused there too (cwdWithin).
  const r: ExecResult = await ctx.sandbox.exec({
    argv: ["sh", "-c", command],
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
    stderr: r.stderr,
    truncated: r.truncated,
    timedOut: r.timedOut,
    oomKilled: r.oomKilled,
    durationMs: r.durationMs,
  };
}

/** A value quoted for sh: single quotes, with embedded ones closed and escaped. */
export function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}
