/**
 * A container in the middle of a workspace recovery (workspace-recovery.ts) carries a marker
 * file outside the workspace, from before the first patch is re-applied until `sandbox.lost`
 * is in the log. A drive that finds the run's container with the marker (its maker died
 * mid-recovery: some patches applied, nothing recorded) removes it and recovers again in a
 * new one. The marker lives in /tmp, which the run's processes can write too: one that makes
 * the marker only gets its own container replaced and its effects recorded lost.
 * Must never: leave a half-recovered workspace looking like a finished one.
 */
import { AgentdError } from "../errors.ts";
import type { SandboxHandle } from "../sandbox/port.ts";

export const RECOVERY_MARKER = "/tmp/.agentd-recovering";

const run = (box: SandboxHandle, argv: string[]) =>
  box.exec({ argv, timeoutMs: 30_000, maxOutputBytes: 4096, env: { ...box.toolEnv } });

export async function markRecovering(box: SandboxHandle): Promise<void> {
  const r = await run(box, ["touch", RECOVERY_MARKER]);
  if (r.exitCode !== 0)
    throw new AgentdError(
      "EIO",
      `cannot mark the sandbox as recovering: ${r.stderr.slice(0, 300)}`,
    );
}

export async function clearRecovering(box: SandboxHandle): Promise<void> {
  await run(box, ["rm", "-f", RECOVERY_MARKER]);
}

/** Whether a found container was left mid-recovery (false when it cannot tell). */
export async function isRecovering(box: SandboxHandle): Promise<boolean> {
  const r = await run(box, ["test", "-e", RECOVERY_MARKER]).catch(() => undefined);
  return r?.exitCode === 0;
}
