/**
 * A lost container, made good: a drive that had to make a new container for a run (the old
 * one was killed, stopped, lost its agent, or its engine restarted) restores the workspace
 * from the last snapshot or the upload (drive-start.ts), then, here, compares it with what
 * the log says was applied since: every repo.patch recorded ok is applied again in log order
 * (kernel/reapply-patch.ts: only when it reproduces its recorded diff), and every other call
 * that may have written (kernel/call-effects.ts) is lost. `sandbox.lost` records both lists
 * and the restore point; the model's next context tells it (engine/context.ts); with policy
 * `sandbox.onLost: fail` and something lost, the run fails ESANDBOX_LOST naming the calls;
 * so does any run on its fourth recorded loss (MAX_LOSSES), whatever the policy.
 * Must never: let a run go on in a replaced workspace without `sandbox.lost` when the log
 * records a write since the restore point, or list as re-applied a call whose write differs.
 */
import { create } from "@bufbuild/protobuf";
import type { ArtifactStore } from "../artifacts/port.ts";
import { AgentdError } from "../errors.ts";
import { type Event, SandboxLostSchema } from "../gen/agentd/v1/events_pb.js";
import { callEffect } from "../kernel/call-effects.ts";
import { reapplyPatch } from "../kernel/reapply-patch.ts";
import type { SandboxHandle } from "../sandbox/port.ts";
import type { Drive } from "./drive.ts";
import { clearRecovering, markRecovering } from "./recovery-marker.ts";
import { SNAPSHOT } from "./run-artifacts.ts";
import type { Next } from "./run-driver.ts";

/** Most losses a run recovers from; the next one fails it (ESANDBOX_LOST). */
export const MAX_LOSSES = 3;

/** A call recorded ok since the restore point whose effect is gone. */
export interface LostCall {
  callId: string;
  tool: string;
  why: string;
}

/** What the log says was written since the restore point, sorted by what can be done about it. */
export interface RecoveryPlan {
  /** Seq of the snapshot's artifact.emitted; 0: the upload. */
  restoredFromSeq: number;
  /** repo.patch calls to apply again, in log order. */
  patches: { callId: string; inputJson: string; result: RecordedResult }[];
  /** Calls whose effects cannot be reproduced, in log order. */
  lost: LostCall[];
}

interface RecordedResult {
  outputJson: string;
  truncated: boolean;
  outputDigest: string;
}

/**
 * The calls since the restore point (the last workspace snapshot, else the upload) that the
 * log records ok and that wrote or may have written, skipping those an earlier
 * `sandbox.lost` already listed (their effects were gone before).
 */
export function planRecovery(events: readonly Event[]): RecoveryPlan {
  const restoredFromSeq = snapshotSeq(events);
  const calls = new Map<string, { tool: string; inputJson: string }>();
  const gone = new Set<string>();
  const plan: RecoveryPlan = { restoredFromSeq, patches: [], lost: [] };
  for (const ev of events) {
    const p = ev.payload;
    if (p.case === "toolCall")
      calls.set(p.value.callId, { tool: p.value.tool, inputJson: p.value.inputJson });
    else if (p.case === "sandboxLost") for (const id of p.value.lostCallIds) gone.add(id);
  }
  for (const ev of events) {
    const p = ev.payload;
    if (Number(ev.seq) <= restoredFromSeq || p.case !== "toolResult" || !p.value.ok) continue;
    const call = calls.get(p.value.callId);
    if (call === undefined || gone.has(p.value.callId)) continue;
    const effect = callEffect(call.tool, parseInput(call.inputJson));
    if (effect === "patch")
      plan.patches.push({ callId: p.value.callId, inputJson: call.inputJson, result: p.value });
    else if (effect === "unreproducible")
      plan.lost.push({
        callId: p.value.callId,
        tool: call.tool,
        why: "a command's effects cannot be reproduced",
      });
  }
  return plan;
}

/**
 * Re-applies the plan's patches in the new container `box` and records `sandbox.lost` when
 * the log had writes since the restore point. Returns the run's end when the policy fails
 * it or a cancel landed meanwhile (nothing recorded lost then), else undefined (the drive
 * goes on).
 */
export async function recoverWorkspace(
  d: Drive,
  box: SandboxHandle,
  reason: string,
): Promise<Next | undefined> {
  const plan = planRecovery(d.events);
  if (plan.patches.length === 0 && plan.lost.length === 0) return undefined;
  const policy = d.deps.policy();
  // Until sandbox.lost is in the log, a drive that finds this container starts over.
  await markRecovering(box);
  const reapplied: string[] = [];
  const lost: LostCall[] = [];
  // In log order: a patch that comes after a lost command may no longer apply (or apply to
  // a different diff), and is then lost itself.
  for (const p of plan.patches) {
    // Cancelled meanwhile: the run ends cancelled; a patch the cancel cut short is not lost
    // (the container, marked, goes with the run).
    if (d.cancel.signal.aborted) return { to: "cancel" };
    const r = await reapplyPatch({
      sandbox: box,
      policy,
      inputJson: p.inputJson,
      recorded: await recordedDocument(d.deps.artifacts, p.result),
      secrets: () => d.writer.secrets.values(),
      signal: d.cancel.signal,
    });
    if (r.ok) reapplied.push(p.callId);
    else lost.push({ callId: p.callId, tool: "repo.patch", why: r.why });
  }
  if (d.cancel.signal.aborted) return { to: "cancel" };
  // The new container went too: nothing is recorded (the next drive recovers anew).
  if ((await box.lost?.()) === true)
    throw new AgentdError("EIO", `the container recovering run ${d.runId} was lost too`);
  const inOrder = [...plan.lost, ...lost].sort(
    (a, b) => order(d.events, a.callId) - order(d.events, b.callId),
  );
  // A run whose containers keep being lost (a workload that kills its own agent, an engine
  // that keeps restarting) ends instead of recovering again and again.
  const losses = d.events.filter((e) => e.payload.case === "sandboxLost").length + 1;
  const tooMany = losses > MAX_LOSSES;
  const failsRun = tooMany || (inOrder.length > 0 && policy.sandbox.onLost === "fail");
  await d.writer.append({
    case: "sandboxLost",
    value: create(SandboxLostSchema, {
      reason,
      lostCallIds: inOrder.map((l) => l.callId),
      restoredFromSeq: BigInt(plan.restoredFromSeq),
      reappliedCallIds: reapplied,
      failsRun,
    }),
  });
  await d.refresh();
  if (!failsRun) {
    await clearRecovering(box);
    return undefined;
  }
  if (tooMany)
    return {
      to: "fail",
      code: "ESANDBOX_LOST",
      message: `the run's container was lost ${losses} times (at most ${MAX_LOSSES} are recovered); the run does not go on`,
    };
  return {
    to: "fail",
    code: "ESANDBOX_LOST",
    message: `the run's container was lost and the effects of ${inOrder.length} recorded call(s) could not be restored: ${inOrder
      .map((l) => `${l.callId} (${l.tool}: ${l.why})`)
      .join(", ")
      .slice(0, 2000)}; policy sandbox.onLost is fail`,
  };
}

/** Seq of the last workspace snapshot's artifact.emitted; 0 when there is none. */
function snapshotSeq(events: readonly Event[]): number {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i];
    const p = e?.payload;
    if (p?.case === "artifactEmitted" && p.value.name === SNAPSHOT) return Number(e?.seq ?? 0);
  }
  return 0;
}

/** Position of a call's result in the log (for sorting the lost calls). */
function order(events: readonly Event[], callId: string): number {
  const i = events.findIndex(
    (e) => e.payload.case === "toolResult" && e.payload.value.callId === callId,
  );
  return i < 0 ? Number.MAX_SAFE_INTEGER : i;
}

function parseInput(json: string): unknown {
  try {
    return JSON.parse(json);
  } catch {
    return undefined;
  }
}

/** The output a result recorded: its full artifact when the event holds a cut form. */
async function recordedDocument(store: ArtifactStore, r: RecordedResult): Promise<unknown> {
  let text = r.outputJson;
  if (r.truncated && r.outputDigest !== "") {
    const parts: Uint8Array[] = [];
    try {
      for await (const c of store.read(r.outputDigest)) parts.push(c);
      text = Buffer.concat(parts).toString("utf8");
    } catch {
      return undefined; // not kept: the patch cannot be checked, so it is not re-applied
    }
  }
  return parseInput(text);
}
