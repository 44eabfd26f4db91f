/**
 * Tool calls of a drive: the calls a model step made, through the kernel, and the calls
 * left open when the drive began (an approval resolved while the run waited; a call of an
 * owner that died, whose processes start() has killed). Must never: run a call without the
 * kernel, run a call whose tool.started is in the log, or answer `interrupted` while
 * anything of that call may still run.
 */
import { create } from "@bufbuild/protobuf";
import type { PendingCall } from "../engine/context.ts";
import type { EngineToolCall } from "../engine/port.ts";
import { ToolCallSchema, ToolResultSchema } from "../gen/agentd/v1/events_pb.js";
import type { KernelRun } from "../kernel/kernel.ts";
import { observeToolResult } from "../telemetry/event-metrics.ts";
import type { Drive } from "./drive.ts";
import { askForHosts, handleAttributed } from "./drive-egress.ts";
import { boxLost } from "./drive-lost.ts";
import { wallLeftMs, wallSpent } from "./drive-usage.ts";
import { answer, interruptedResult } from "./open-calls.ts";
import type { Next } from "./run-driver.ts";

/**
 * Settles the calls left open; "hold" when one still waits for a person. A call that started
 * (tool.started, under an owner that died or let go: start() killed everything it left in
 * the container) is answered `interrupted` whatever its approval and never runs again: the
 * model decides. One that never started and needed no approval is answered `interrupted`
 * too (it did not run); an approved one runs now, a denied one gets its denial.
 */
export async function settleOpenCalls(d: Drive, pending: readonly PendingCall[]): Promise<Next> {
  const k = d.kernelRun as KernelRun;
  for (const p of pending) {
    const call = { callId: p.callId, tool: p.tool, input: p.input };
    if (p.started || p.approval === undefined) {
      await answer(d, p, interruptedResult(p));
    } else if (p.approval.state === "awaiting") {
      return { to: "hold" };
    } else {
      // A container lost while the run waited for the person (one inspect per approval):
      // the approved call runs in the recovered workspace of the next drive, not in this one.
      if (await boxLost(d)) return { to: "release" };
      if (wallLeftMs(d) <= 0) return wallSpent(d);
      d.egress?.setCall({ callId: call.callId, tool: call.tool });
      const disarm = d.armWallBudget(wallLeftMs(d));
      try {
        await d.deps.kernel.continueAfterApproval(k, call, {
          approved: p.approval.state === "approved",
          reason: p.approval.reason,
        });
      } finally {
        disarm();
        d.egress?.setCall(undefined);
      }
      if (wallLeftMs(d) <= 0) return wallSpent(d);
      const asked = await askForHosts(d, call);
      if (asked !== undefined) return asked;
    }
  }
  return { to: "step" };
}

/** Calls the model got wrong are answered with the error, so it can try again. */
export async function answerMalformed(
  d: Drive,
  bad: readonly {
    callId: string;
    tool: string;
    input: unknown;
    error: { code: string; message: string };
  }[],
): Promise<void> {
  for (const b of bad) {
    await d.writer.append({
      case: "toolCall",
      value: create(ToolCallSchema, {
        callId: b.callId,
        tool: b.tool,
        inputJson: JSON.stringify(b.input ?? null),
      }),
    });
    const result = create(ToolResultSchema, { callId: b.callId, ok: false, error: b.error });
    await d.writer.append({ case: "toolResult", value: result });
    observeToolResult(b.tool, "none", result);
  }
}

/**
 * The step's calls through the kernel, in order. A call that waits for a person ends the
 * step ("hold": the step's later calls are dropped, as the next context is rebuilt from the
 * log, which never saw them); the same failing call repeated ends the run (ELOOP).
 */
export async function runCalls(
  d: Drive,
  calls: readonly EngineToolCall[],
): Promise<Next | undefined> {
  for (const call of calls) {
    if (d.cancel.signal.aborted) return { to: "cancel" };
    // The call is killed when the run's wall time runs out (the kernel records ELIMIT_TIME
    // as its result), and the run then ends with the wall budget's error.
    if (wallLeftMs(d) <= 0) return wallSpent(d);
    const disarm = d.armWallBudget(wallLeftMs(d));
    let out: Awaited<ReturnType<typeof handleAttributed>>;
    try {
      out = await handleAttributed(d, call);
    } finally {
      disarm();
    }
    if (out.kind === "paused") return { to: "hold" };
    if (wallLeftMs(d) <= 0) return wallSpent(d);
    // The container went away under the call: the next drive recovers the workspace.
    if (!out.ok && (await boxLost(d))) return { to: "release" };
    // A host this call's processes tried, outside the allowlist, waits for a person now.
    const asked = await askForHosts(d, call);
    if (asked !== undefined) return asked;
    // A model that keeps making the same failing call is stopped, not paid for forever.
    const key = `${call.tool}\u0000${JSON.stringify(call.input)}`;
    const n = out.ok ? 0 : (d.failures.get(key) ?? 0) + 1;
    d.failures.set(key, n);
    if (n >= d.deps.limits.maxRepeatedFailures)
      return {
        to: "fail",
        code: "ELOOP",
        message: `the model made the same failing ${call.tool} call ${n} times`,
      };
  }
  return undefined;
}
