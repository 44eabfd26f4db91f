/**
 * Metrics derived from the events a process appends: each event is counted once, by the
 * process that appended it (the worker for decisions and outcomes, the server for created
 * runs), plus the tool results, counted where they are recorded. Must never: put an
 * event's content (inputs, outputs, reasons, ids) into a label.
 */
import { type Timestamp, timestampMs } from "@bufbuild/protobuf/wkt";
import type { EventPayload } from "../eventlog/event-codec.ts";
import { ApprovalDecision, Decision, type ToolResult } from "../gen/agentd/v1/events_pb.js";
import { toolByName } from "../tools/registry.ts";
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

export function decisionLabel(d: Decision): string {
  return DECISIONS[d] ?? "unspecified";
}

/** Counts one appended event. */
export function observeEvent(payload: EventPayload): void {
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
    case "sandboxLost":
      metrics.sandboxesLost.inc({
        outcome: payload.value.failsRun
          ? "failed"
          : payload.value.lostCallIds.length > 0
            ? "lost"
            : "restored",
      });
      return;
    case "policyDecision":
      metrics.policyDecisions.inc({
        decision: decisionLabel(payload.value.decision),
        rule: bounded("rule", payload.value.rule),
      });
      return;
    default:
      return;
  }
}

/** The kernel's decision paths as labels ("none": the call never reached a decision). */
const PATHS: Record<string, string> = {
  auto: "auto",
  "preview+auto": "preview_auto",
  "preview+approval": "preview_approval",
  deny: "deny",
};

/**
 * A tool.result recorded for a call of `tool` decided `path`: counted by whoever records
 * it (the kernel, or the driver for a call it settles) — not from the event stream, since
 * the call and its result may be recorded by two workers (an approval in between, a
 * takeover).
 */
export function observeToolResult(tool: string, path: string, r: ToolResult): void {
  // Only names of agentd's tools: a model (or a prompt injection) names any tool it likes,
  // and /metrics is readable without a token.
  const label = toolByName(tool) === undefined ? "unknown" : tool;
  const outcome = r.ok ? "ok" : (OUTCOMES[r.error?.code ?? ""] ?? "error");
  metrics.toolCalls.inc({ tool: label, decision: PATHS[path] ?? "none", outcome });
  metrics.toolDuration.observe({ tool: label }, Number(r.durationMs) / 1000);
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
