/**
 * Metrics derived from the events a process appends: each event is counted once, by the
 * process that appended it (the worker for calls and outcomes, the server for created
 * runs). A tool.result is labelled with its call's tool and decision, remembered from the
 * same writer's tool.call and policy.decision. Must never: put an event's content (inputs,
 * outputs, reasons, ids) into a label.
 */
import { type Timestamp, timestampMs } from "@bufbuild/protobuf/wkt";
import type { EventPayload } from "../eventlog/event-codec.ts";
import { ApprovalDecision, Decision } from "../gen/agentd/v1/events_pb.js";
import { bounded, metrics } from "./metrics.ts";

const DECISIONS: Record<number, string> = {
  [Decision.AUTO]: "auto",
  [Decision.PREVIEW_AUTO]: "preview_auto",
  [Decision.PREVIEW_APPROVAL]: "preview_approval",
  [Decision.DENY]: "deny",
};

/** Error codes of tool results as outcome labels (anything else is "error"). */
const OUTCOMES: Record<string, string> = {
  EPOLICY: "denied",
  EAPPROVAL_DENIED: "approval_denied",
  cancelled: "cancelled",
  interrupted: "interrupted",
  ETIMEOUT: "timeout",
  ETOOLARGE: "too_large",
};

interface Pending {
  tool: string;
  decision: string;
}

/** Calls between their tool.call and tool.result, per run and call (bounded). */
const calls = new Map<string, Pending>();
const CALLS_MAX = 10_000;

export function decisionLabel(d: Decision): string {
  return DECISIONS[d] ?? "unspecified";
}

/** Counts one appended event. */
export function observeEvent(runId: string, payload: EventPayload): void {
  switch (payload.case) {
    case "runQueued":
      metrics.runsCreated.inc();
      return;
    case "runCompleted":
      metrics.runsEnded.inc({ outcome: "completed" });
      return;
    case "runFailed":
      metrics.runsEnded.inc({ outcome: "failed" });
      return;
    case "runCancelled":
      metrics.runsEnded.inc({ outcome: "cancelled" });
      return;
    case "toolCall":
      remember(runId, payload.value.callId, { tool: bounded("tool", payload.value.tool) });
      return;
    case "policyDecision": {
      const decision = decisionLabel(payload.value.decision);
      metrics.policyDecisions.inc({ decision, rule: bounded("rule", payload.value.rule) });
      remember(runId, payload.value.callId, { decision });
      return;
    }
    case "toolResult": {
      const key = `${runId}/${payload.value.callId}`;
      const call = calls.get(key) ?? { tool: "unknown", decision: "unspecified" };
      calls.delete(key);
      const r = payload.value;
      const outcome = r.ok ? "ok" : (OUTCOMES[r.error?.code ?? ""] ?? "error");
      metrics.toolCalls.inc({ tool: call.tool, decision: call.decision, outcome });
      metrics.toolDuration.observe({ tool: call.tool }, Number(r.durationMs) / 1000);
      return;
    }
    default:
      return;
  }
}

function remember(runId: string, callId: string, part: Partial<Pending>): void {
  const key = `${runId}/${callId}`;
  const was = calls.get(key) ?? { tool: "unknown", decision: "unspecified" };
  calls.set(key, { ...was, ...part });
  if (calls.size > CALLS_MAX) calls.delete(calls.keys().next().value as string);
}

/** An approval resolved now (by a person or by expiry): how long it waited. */
export function observeApprovalWait(
  requestedAt: Timestamp | undefined,
  decision: ApprovalDecision,
  byExpiry: boolean,
  now: number,
): void {
  if (requestedAt === undefined) return;
  const label = byExpiry
    ? "expired"
    : decision === ApprovalDecision.APPROVE
      ? "approved"
      : "denied";
  metrics.approvalWait.observe(
    { decision: label },
    Math.max(0, now - timestampMs(requestedAt)) / 1000,
  );
}
