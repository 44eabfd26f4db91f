/**
 * A container in the middle of a workspace recovery (workspace-recovery.ts) carries a marker
 * outside the workspace, from before the first patch is re-applied until `sandbox.lost` is
 * in the log. A drive that finds the run's container with the marker (its maker died
 * mid-recovery: some patches applied, nothing recorded) removes it and recovers again in a
 * new one. The marker is a root mark (sandbox/root-marks.ts) the run's processes can neither
 * make nor remove nor see: none can get its container replaced on purpose (a bit told
 * across a takeover). A sandbox without root marks (a stand-in) keeps it as a file in /tmp.
 * Known limit: a container an older agentd left mid-recovery (its marker a file) is not
 * seen as such after the upgrade.
 * Must never: leave a half-recovered workspace looking like a finished one.
 */
import { AgentdError } from "../errors.ts";
import type { SandboxHandle } from "../sandbox/port.ts";

/** Where a sandbox without root marks keeps the marker. */
export const RECOVERY_MARKER = "/tmp/.agentd-recovering";

const run = (box: SandboxHandle, argv: string[]) =>
  box.exec({ argv, timeoutMs: 30_000, maxOutputBytes: 4096, env: { ...box.toolEnv } });

export async function markRecovering(box: SandboxHandle): Promise<void> {
  if (box.mark !== undefined) {
    await box.mark("recovering", "set");
    return;
  }
  const r = await run(box, ["touch", RECOVERY_MARKER]);
  if (r.exitCode !== 0)
    throw new AgentdError(
      "EIO",
      `cannot mark the sandbox as recovering: ${r.stderr.slice(0, 300)}`,
    );
}

export async function clearRecovering(box: SandboxHandle): Promise<void> {
  if (box.mark !== undefined) await box.mark("recovering", "clear");
  else await run(box, ["rm", "-f", RECOVERY_MARKER]);
}

/** Whether a found container was left mid-recovery (false when it cannot tell). */
export async function isRecovering(box: SandboxHandle): Promise<boolean> {
  if (box.mark !== undefined) return box.mark("recovering", "test").catch(() => false);
  const r = await run(box, ["test", "-e", RECOVERY_MARKER]).catch(() => undefined);
  return r?.exitCode === 0;
}
