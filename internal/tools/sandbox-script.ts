/** Runs the tools' small POSIX shell programs in the run's sandbox and decodes their answers. */
import { AgentdError } from "../errors.ts";
import type { ExecResult } from "../sandbox/port.ts";
import { checkDenied, relativeToWorkspace } from "./jail.ts";
import type { ToolContext } from "./tool.ts";

/** Helper programs are quick; a stuck one is killed after this long. */
const SCRIPT_TIMEOUT_MS = 30_000;

export async function runScript(
  ctx: ToolContext,
  script: string,
  args: readonly string[],
  opts: { stdin?: Uint8Array; maxOutputBytes?: number; timeoutMs?: number } = {},
): Promise<ExecResult> {
  return ctx.sandbox.exec({
    argv: ["sh", "-c", script, "agentd-tool", ...args],
    timeoutMs: opts.timeoutMs ?? SCRIPT_TIMEOUT_MS,
    maxOutputBytes: opts.maxOutputBytes ?? 64 * 1024,
    ...(opts.stdin === undefined ? {} : { stdin: opts.stdin }),
    ...(ctx.sandbox.toolEnv === undefined ? {} : { env: { ...ctx.sandbox.toolEnv } }),
    ...(ctx.signal === undefined ? {} : { signal: ctx.signal }),
  });
}

/**
 * Splits "<resolved path>\0<rest>" printed by a jailed script and re-checks the resolved
 * path: under /workspace and not denied (a symlink may point at .git/config).
 */
export function resolvedAnswer(
  ctx: ToolContext,
  field: string,
  shown: string,
  stdout: string,
): { abs: string; rel: string; rest: string } {
  const i = stdout.indexOf("\0");
  if (i < 0)
    throw new AgentdError(
      "EIO",
      `${field} ${JSON.stringify(shown)}: the sandbox gave no resolved path`,
    );
  const abs = stdout.slice(0, i);
  const rel = relativeToWorkspace(field, shown, abs);
  checkDenied(field, shown, rel, ctx.denyPatterns);
  return { abs, rel, rest: stdout.slice(i + 1) };
}
