/**
 * A run's container says, by a mark in its /tmp, that its workspace was filled in this boot
 * of the container: the mark is written once the workspace is unpacked, and a tmpfs is empty
 * after any restart (`docker restart`, stop and start, the engine's restart policy). A found
 * container without it (restarted, or named for its run before its fill finished) holds no
 * workspace of the run's and must never be taken for one: find() removes it, and the next
 * drive recovers the workspace from the log (workspace-recovery.ts).
 *
 * The mark is agentd's own, in a directory of root's the sandbox user can neither write nor
 * list (root-marks.ts): a run's process cannot remove it to get its container replaced on
 * purpose (a bit told across a takeover), nor make a restarted container look filled.
 * Containers made before that (label value "1") kept it as a file the sandbox user wrote,
 * and are checked there, so the runs in flight across an upgrade are found as before;
 * containers without the label are not checked.
 * Must never: report a container filled whose /tmp it could not read, or call one unfilled
 * on a doubt (it would be given up with the run's workspace in it).
 */
import { AgentdError } from "../errors.ts";
import type { SandboxHandle } from "./port.ts";

/**
 * Containers created by a version that writes the mark carry this label: "2" (MARK_ROOT)
 * when the mark is a root mark, "1" when it is the file LEGACY_FILL_MARK.
 */
export const LABEL_FILL_MARK = "agentd.fill-mark";
export const MARK_ROOT = "2";
export const LEGACY_FILL_MARK = "/tmp/.agentd-filled";

/** The handle's mark operation: root marks (docker-handle.ts `mark`). */
type Marked = Pick<SandboxHandle, "exec" | "runId" | "toolEnv"> &
  Required<Pick<SandboxHandle, "mark">>;

/** Writes the mark; a container that cannot take it is not handed out. */
export async function markFilled(box: Marked): Promise<void> {
  await box.mark("filled", "set");
}

/**
 * Whether the container still holds the mark (`label`: its LABEL_FILL_MARK); throws when it
 * cannot tell (the engine did not answer, the look itself failed): a container is never
 * given up on a doubt.
 */
export async function isFilled(box: Marked, label: string): Promise<boolean> {
  if (label === MARK_ROOT) return box.mark("filled", "test");
  const r = await box.exec({
    argv: ["test", "-e", LEGACY_FILL_MARK],
    timeoutMs: 30_000,
    maxOutputBytes: 4096,
    env: { ...box.toolEnv },
  });
  if (r.exitCode === 0) return true;
  if (r.exitCode === 1) return false;
  throw new AgentdError(
    "EIO",
    `cannot tell whether the sandbox of run ${box.runId} holds its workspace (the look exited ${r.exitCode}): ${r.stderr.slice(0, 200)}`,
  );
}
