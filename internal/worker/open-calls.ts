/**
 * Calls the log holds open (a tool.call with no tool.result) that no kernel will run: what
 * their results say. A call whose tool.started is in the log began executing under an owner
 * that is gone: it is answered `interrupted`, its effect unknown, whatever its approval, and
 * is never run again (running it again is a new call, decided and approved again). A call
 * with no tool.started never ran, and its answer says so. Used when a drive settles the calls
 * it found open (drive-calls.ts) and before a drive ends the run (drive-end.ts): a run never
 * ends with a call that has no result.
 *
 * Must never: answer a call while anything of it may still run (the caller killed every
 * process of the run's container first), or answer a call the log already answered (the
 * caller read the log after its own last append).
 */
import { create } from "@bufbuild/protobuf";
import type { PendingCall } from "../engine/context.ts";
import { projectHistory } from "../engine/context.ts";
import { type ToolResult, ToolResultSchema } from "../gen/agentd/v1/events_pb.js";
import { observeToolResult } from "../telemetry/event-metrics.ts";
import type { Drive } from "./drive.ts";

/** What the model is told of a started call whose worker stopped before its result. */
export const STARTED_UNKNOWN =
  "the worker running this call stopped before recording its result; its processes were killed, so its effect is unknown (it may have run in part or in full). It was not run again: running it again is a new call, which the policy decides again (and a person approves again where the policy asks for one)";

/** The same for a call that never started (its tool.started is not in the log). */
export const NOT_STARTED =
  "the worker handling this call stopped before the call started; it did not run";

/** The result of an open call the drive will not run: `interrupted`, started or not. */
export function interruptedResult(p: PendingCall): ToolResult {
  return create(ToolResultSchema, {
    callId: p.callId,
    ok: false,
    error: { code: "interrupted", message: p.started ? STARTED_UNKNOWN : NOT_STARTED },
  });
}

/**
 * The result of an open call when the run ends without running it: a started one is
 * `interrupted` (its effect unknown), one that never started says why it never will
 * (`code`: "cancelled" when the run was cancelled; `why`: what ended the run).
 */
export function endResult(p: PendingCall, code: string, why: string): ToolResult {
  if (p.started) return interruptedResult(p);
  return create(ToolResultSchema, {
    callId: p.callId,
    ok: false,
    error: { code, message: `${why} before this call started; it did not run` },
  });
}

/** Appends `result` for `p`, counted like every tool result. */
export async function answer(d: Drive, p: PendingCall, result: ToolResult): Promise<void> {
  await d.writer.append({ case: "toolResult", value: result });
  observeToolResult(p.tool, "none", result);
}

/**
 * Before the run's end: every call still open gets its result. Reads the log first (this
 * drive's own results included), so no call is answered twice; a read that fails fails the
 * end (whoever drives the run next ends it, with the same answers).
 */
export async function answerOpenCalls(d: Drive, code: string, why: string): Promise<void> {
  await d.refresh();
  for (const p of projectHistory(d.events).pending) await answer(d, p, endResult(p, code, why));
}
