/**
 * The `policy.shadow` event of a call whose candidate (shadow) policy decided differently
 * from the enforced one, and its count (agentd_policy_shadow_differences_total). Only
 * builds the record: the kernel appends it beside the call's policy.decision.
 *
 * Must never: carry a secret (the summary and reasons go through the caller's redactor),
 * a file's directory (only base names), or unbounded text.
 */
import { create } from "@bufbuild/protobuf";
import type { EventPayload } from "../eventlog/event-codec.ts";
import {
  Decision as DecisionEnum,
  PolicyShadowSchema,
  PolicyShadowSideSchema,
} from "../gen/agentd/v1/events_pb.js";
import { metrics } from "../telemetry/metrics.ts";
import type { ControlPath, Decision } from "./decide.ts";
import { decisionProvenance } from "./decision-provenance.ts";
import { clipText } from "./head-tail.ts";
import type { Policy } from "./policy-schema.ts";

/** Longest summary of the call a policy.shadow carries. */
export const MAX_SHADOW_SUMMARY = 512;
const MAX_RULE = 256;
const MAX_REASON = 1024;

const ENUM: Record<ControlPath, DecisionEnum> = {
  auto: DecisionEnum.AUTO,
  "preview+auto": DecisionEnum.PREVIEW_AUTO,
  "preview+approval": DecisionEnum.PREVIEW_APPROVAL,
  deny: DecisionEnum.DENY,
};
/** Metric label of a control path (bounded: four values). */
const LABEL: Record<ControlPath, string> = {
  auto: "auto",
  "preview+auto": "preview_auto",
  "preview+approval": "preview_approval",
  deny: "deny",
};

/** One side's decision and the policy that made it. */
export interface ShadowSide {
  decision: Decision;
  policy: Policy;
  source: "tenant" | "server";
  path: string | undefined;
}

export interface ShadowRecord {
  callId: string;
  tool: string;
  enforced: ShadowSide;
  candidate: ShadowSide;
  /** What the call does, already redacted. */
  summary: string;
  /** Redacts a reason. */
  redact: (s: string) => string;
  /** The tenant label of the metric ("" for runs on the server's shared kernel). */
  tenant: string;
}

/**
 * Counts a difference (agentd_policy_shadow_differences_total): once its policy.shadow is in
 * the log, so the metric never counts a record an append lost.
 */
export function countShadow(r: ShadowRecord): void {
  metrics.policyShadowDifferences.inc({
    tenant: r.tenant,
    enforced: LABEL[r.enforced.decision.path],
    candidate: LABEL[r.candidate.decision.path],
  });
}

/** The policy.shadow payload (pure: countShadow counts it once appended). */
export function shadowEvent(r: ShadowRecord): EventPayload {
  const side = (s: ShadowSide) =>
    create(PolicyShadowSideSchema, {
      decision: ENUM[s.decision.path],
      rule: clipText(s.decision.rule, MAX_RULE),
      reason: clipText(r.redact(s.decision.reason), MAX_REASON),
      ...decisionProvenance(s.policy, s.source, s.path),
    });
  return {
    case: "policyShadow",
    value: create(PolicyShadowSchema, {
      callId: r.callId,
      tool: clipText(r.tool, MAX_RULE),
      enforced: side(r.enforced),
      candidate: side(r.candidate),
      summary: clipText(r.summary, MAX_SHADOW_SUMMARY),
    }),
  };
}
