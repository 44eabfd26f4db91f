/**
 * A run's events folded into what a person reads: model text (deltas joined, replaced by
 * the complete message), tool calls with their decision, output and result, approvals with
 * their resolution, artifacts and state changes (the model reviewer's verdicts and their
 * overrides, a shadow candidate's differences among them). Pure: the same events give the same items.
 */
import {
  type ApprovalRequested,
  type ApprovalResolved,
  type ArtifactEmitted,
  Decision,
  type Event,
  type PolicyDecision,
  type ToolResult,
} from "../../gen/agentd/v1/events_pb.js";

export type Item =
  | { kind: "text"; key: string; text: string; complete: boolean }
  | {
      kind: "tool";
      key: string;
      callId: string;
      tool: string;
      input: string;
      decision?: PolicyDecision;
      output: string;
      result?: ToolResult;
    }
  | {
      kind: "approval";
      key: string;
      req: ApprovalRequested;
      ts: Date | undefined;
      resolved?: ApprovalResolved;
    }
  | { kind: "artifact"; key: string; art: ArtifactEmitted }
  /** `alert`: something a person must notice (sandbox.lost: effects of the run are gone). */
  | { kind: "state"; key: string; type: string; detail: string; alert?: boolean };

export interface Timeline {
  items: Item[];
  lastSeq: bigint;
}

export const EMPTY: Timeline = { items: [], lastSeq: 0n };

/** Adds events (in seq order) to a timeline; returns a new one. */
export function fold(
  t: Timeline,
  events: readonly Event[],
  tsOf: (e: Event) => Date | undefined,
): Timeline {
  const items = [...t.items];
  let lastSeq = t.lastSeq;
  const tools = new Map<string, number>();
  const approvals = new Map<string, number>();
  items.forEach((it, i) => {
    if (it.kind === "tool") tools.set(it.callId, i);
    if (it.kind === "approval") approvals.set(it.req.approvalId, i);
  });
  const patch = <K extends Item["kind"]>(
    i: number | undefined,
    f: (it: Extract<Item, { kind: K }>) => Item,
  ) => {
    if (i === undefined) return;
    items[i] = f(items[i] as Extract<Item, { kind: K }>);
  };
  for (const e of events) {
    if (e.seq <= lastSeq) continue;
    lastSeq = e.seq;
    const key = String(e.seq);
    const p = e.payload;
    const last = items[items.length - 1];
    switch (p.case) {
      case "outputDelta":
        if (last?.kind === "text" && !last.complete)
          items[items.length - 1] = { ...last, text: last.text + p.value.text };
        else items.push({ kind: "text", key, text: p.value.text, complete: false });
        break;
      case "outputMessage":
        // The complete message follows the deltas it was streamed as: it replaces them.
        if (last?.kind === "text" && !last.complete)
          items[items.length - 1] = { ...last, text: p.value.text, complete: true };
        else items.push({ kind: "text", key, text: p.value.text, complete: true });
        break;
      case "toolCall":
        tools.set(p.value.callId, items.length);
        items.push({
          kind: "tool",
          key,
          callId: p.value.callId,
          tool: p.value.tool,
          input: p.value.inputJson,
          output: "",
        });
        break;
      case "policyDecision": {
        const v = p.value;
        patch<"tool">(tools.get(v.callId), (it) => ({ ...it, decision: v }));
        break;
      }
      case "toolOutput": {
        const v = p.value;
        patch<"tool">(tools.get(v.callId), (it) => ({ ...it, output: it.output + v.chunk }));
        break;
      }
      case "toolResult": {
        const v = p.value;
        patch<"tool">(tools.get(v.callId), (it) => ({ ...it, result: v }));
        break;
      }
      case "approvalRequested":
        approvals.set(p.value.approvalId, items.length);
        items.push({ kind: "approval", key, req: p.value, ts: tsOf(e) });
        break;
      case "approvalResolved": {
        const v = p.value;
        patch<"approval">(approvals.get(v.approvalId), (it) => ({ ...it, resolved: v }));
        break;
      }
      case "artifactEmitted":
        items.push({ kind: "artifact", key, art: p.value });
        break;
      case "runQueued":
        items.push({
          kind: "state",
          key,
          type: e.type,
          detail: `by ${p.value.submittedBy || "?"}`,
        });
        break;
      case "runStarted":
        items.push({
          kind: "state",
          key,
          type: e.type,
          detail: `on ${p.value.workerId}${p.value.image === "" ? "" : ` · ${p.value.image}`}`,
        });
        break;
      case "runPaused":
        items.push({ kind: "state", key, type: e.type, detail: p.value.reason });
        break;
      case "runResumed":
        items.push({ kind: "state", key, type: e.type, detail: "" });
        break;
      case "runCompleted":
        items.push({ kind: "state", key, type: e.type, detail: p.value.summary });
        break;
      case "runFailed":
        items.push({
          kind: "state",
          key,
          type: e.type,
          detail: `${p.value.error?.code ?? ""} ${p.value.error?.message ?? ""}`.trim(),
        });
        break;
      case "runCancelled":
      case "runCancelRequested":
        items.push({ kind: "state", key, type: e.type, detail: p.value.reason });
        break;
      case "logRewound":
        // Prominent: the stored log says it lost events (docs/operations.md).
        items.push({
          kind: "state",
          key,
          type: e.type,
          detail: `the stored log lost events ${p.value.storedSeq + 1n}–${p.value.expectedSeq} (${p.value.writer} had seen seq ${p.value.expectedSeq}); the run is failed`,
        });
        break;
      case "checkpointCreated":
        items.push({
          kind: "state",
          key,
          type: e.type,
          detail: `through seq ${p.value.throughSeq}`,
        });
        break;
      case "cacheRestored":
      case "cacheSaved": {
        const v = p.value;
        items.push({
          kind: "state",
          key,
          type: e.type,
          detail: `${v.ecosystem} ${v.lockfile} sha256:${v.digest.slice(0, 12)}`,
        });
        break;
      }
      case "networkRequest": {
        const v = p.value;
        items.push({
          kind: "state",
          key,
          type: e.type,
          detail: `${v.method} ${v.host}:${v.port} ${v.decision}`,
        });
        break;
      }
      case "imagePull": {
        const v = p.value;
        items.push({
          kind: "state",
          key,
          type: e.type,
          detail: `${v.image} ${v.phase}${v.reason === "" ? "" : ` (${v.reason})`}`,
        });
        break;
      }
      case "sandboxLost": {
        const v = p.value;
        const from =
          v.restoredFromSeq > 0n ? `the snapshot at event ${v.restoredFromSeq}` : "the upload";
        items.push({
          kind: "state",
          key,
          type: e.type,
          alert: true,
          detail: `container lost; workspace restored from ${from}${v.reappliedCallIds.length > 0 ? `, re-applied ${v.reappliedCallIds.join(", ")}` : ""}; ${v.lostCallIds.length === 0 ? "nothing recorded was lost" : `effects LOST of ${v.lostCallIds.join(", ")}`}${v.failsRun ? "; the run fails (sandbox.onLost: fail)" : ""}`,
        });
        break;
      }
      case "reviewerVerdict": {
        const v = p.value;
        const took = v.verdict === v.modelVerdict ? "" : `; took effect: ${v.verdict} (${v.note})`;
        items.push({
          kind: "state",
          key,
          type: e.type,
          detail: `call ${v.callId}: the model reviewer (${v.model}) said ${v.modelVerdict || "nothing usable"} at confidence ${v.confidence}${took}. ${clip(v.reasoning, 300)}`,
        });
        break;
      }
      case "reviewerOverridden": {
        const v = p.value;
        items.push({
          kind: "state",
          key,
          type: e.type,
          alert: v.attention,
          detail: `call ${v.callId}: ${v.overriddenBy} overrode the reviewer's ${v.previousVerdict} with ${v.verdict}: ${clip(v.reason, 300)}`,
        });
        break;
      }
      case "policyShadow": {
        const v = p.value;
        const side = (x: typeof v.enforced) =>
          `${SHADOW_PATHS[x?.decision ?? 0] ?? "undecided"} (${x?.rule ?? ""})`;
        items.push({
          kind: "state",
          key,
          type: e.type,
          detail: `call ${v.callId} ${v.tool}: the candidate policy ${v.candidate?.policyFile ?? ""} would ${side(v.candidate)}; enforced: ${side(v.enforced)}. ${clip(v.summary, 200)}`,
        });
        break;
      }
      default:
        // usage.updated: GetRun's header shows the totals. tool.started: the call's item
        // already shows it running until its result comes.
        break;
    }
  }
  return { items, lastSeq };
}

/** A decision's path in a shadow record's words (Decision enum values). */
const SHADOW_PATHS: Record<number, string> = {
  [Decision.AUTO]: "auto",
  [Decision.PREVIEW_AUTO]: "preview, auto",
  [Decision.PREVIEW_APPROVAL]: "ask a person",
  [Decision.DENY]: "deny",
};

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}
