/**
 * A run's container says, by a file in its /tmp, that its workspace was filled in this boot
 * of the container: the mark is written once the workspace is unpacked, and a tmpfs is empty
 * after any restart (`docker restart`, stop and start, the engine's restart policy). A found
 * container without it (restarted, or named for its run before its fill finished) holds no
 * workspace of the run's and must never be taken for one: find() removes it, and the next
 * drive recovers the workspace from the log (workspace-recovery.ts).
 *
 * The mark is written by the sandbox's user, like the recovery marker: a run's process can
 * remove it, which only gets its own container replaced and its effects recorded lost at
 * the next takeover; it cannot make a restarted container look filled (nothing of the run
 * runs there before the check). Only containers labelled as marked are checked, so the
 * containers of runs in flight across an upgrade are found as before.
 * Must never: report a container filled whose /tmp it could not read, or call one unfilled
 * on a doubt (it would be given up with the run's workspace in it).
 */
import { AgentdError } from "../errors.ts";
import type { SandboxHandle } from "./port.ts";

/** Containers created by a version that writes the mark carry this label (value "1"). */
export const LABEL_FILL_MARK = "agentd.fill-mark";
export const FILL_MARK = "/tmp/.agentd-filled";

const sh = (box: SandboxHandle, script: string) =>
  box.exec({
    argv: ["sh", "-c", script],
    timeoutMs: 30_000,
    maxOutputBytes: 4096,
    env: { ...box.toolEnv },
  });

/** Writes the mark; a container that cannot take it is not handed out. */
export async function markFilled(box: SandboxHandle): Promise<void> {
  const r = await sh(box, `: > ${FILL_MARK}`);
  if (r.exitCode !== 0)
    throw new Error(`cannot mark the workspace filled: ${r.stderr.slice(0, 300)}`);
}

/**
 * Whether the container still holds the mark; throws when it cannot tell (the engine did
 * not answer, the look itself failed): a container is never given up on a doubt.
 */
export async function isFilled(box: SandboxHandle): Promise<boolean> {
  const r = await sh(box, `test -e ${FILL_MARK}`);
  if (r.exitCode === 0) return true;
  if (r.exitCode === 1) return false;
  throw new AgentdError(
    "EIO",
    `cannot tell whether the sandbox of run ${box.runId} holds its workspace (the look exited ${r.exitCode}): ${r.stderr.slice(0, 200)}`,
  );
}
