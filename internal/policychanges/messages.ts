/**
 * Stored policy changes as the API and the feed show them: the PolicyChange message, the
 * ProposedRule, and the sealed `policy.change_proposed` / `policy.change_applied` notices
 * (tenant feed, EventLog.publish; `run_id` the run whose approval proposed the change).
 *
 * Must never: show the absolute path of a policy file (its base name only) or the file's
 * whole text.
 */
import { basename } from "node:path";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { sealEvent } from "../eventlog/event-codec.ts";
import { GENESIS_HASH } from "../eventlog/hash-chain.ts";
import {
  PolicyChangeAppliedSchema,
  PolicyChangeProposedSchema,
  PolicyChangeState,
  type ProposedRule,
  ProposedRuleKind,
  ProposedRuleSchema,
} from "../gen/agentd/v1/events_pb.js";
import { type PolicyChange, PolicyChangeSchema } from "../gen/agentd/v1/run_service_pb.js";
import type { StoredPolicyChange, StoredRule } from "./port.ts";

export function ruleMessage(r: StoredRule): ProposedRule {
  return r.kind === "command"
    ? create(ProposedRuleSchema, {
        kind: ProposedRuleKind.COMMAND,
        command: r.command,
        repo: r.repo,
      })
    : create(ProposedRuleSchema, { kind: ProposedRuleKind.HOST, host: r.host });
}

export function stateEnum(s: StoredPolicyChange["state"]): PolicyChangeState {
  return s === "pending"
    ? PolicyChangeState.PENDING
    : s === "applied"
      ? PolicyChangeState.APPLIED
      : PolicyChangeState.REJECTED;
}

export function changeMessage(c: StoredPolicyChange): PolicyChange {
  return create(PolicyChangeSchema, {
    changeId: c.id,
    tenantId: c.tenantId,
    state: stateEnum(c.state),
    rule: ruleMessage(c.rule),
    proposedBy: c.proposedBy,
    approvalId: c.approvalId,
    runId: c.runId,
    callId: c.callId,
    policyFile: basename(c.path),
    needsTenantFile: c.needsTenantFile,
    diff: c.diff,
    baseSha256: c.baseSha256,
    proposedAt: timestampFromMs(c.proposedAt),
    ...(c.settledAt === undefined ? {} : { settledAt: timestampFromMs(c.settledAt) }),
    settledBy: c.settledBy ?? "",
    reason: c.reason ?? "",
  });
}

/** The canonical JSON of `policy.change_proposed`. */
export function proposedNotice(c: StoredPolicyChange): string {
  const value = create(PolicyChangeProposedSchema, {
    changeId: c.id,
    tenantId: c.tenantId,
    proposedBy: c.proposedBy,
    approvalId: c.approvalId,
    callId: c.callId,
    rule: ruleMessage(c.rule),
    policyFile: basename(c.path),
    needsTenantFile: c.needsTenantFile,
  });
  return sealEvent(
    { runId: c.runId, sessionId: "", payload: { case: "policyChangeProposed", value } },
    0,
    GENESIS_HASH,
    c.proposedAt,
  ).json;
}

/** The canonical JSON of `policy.change_applied` (applied or rejected: `state`). */
export function appliedNotice(c: StoredPolicyChange): string {
  const at = c.settledAt ?? Date.now();
  const value = create(PolicyChangeAppliedSchema, {
    changeId: c.id,
    tenantId: c.tenantId,
    state: stateEnum(c.state),
    proposedBy: c.proposedBy,
    appliedBy: c.settledBy ?? "",
    rule: ruleMessage(c.rule),
    policyFile: basename(c.path),
    oldDigest: c.oldDigest ?? "",
    newDigest: c.newDigest ?? "",
    reason: c.reason ?? "",
    at: timestampFromMs(at),
  });
  return sealEvent(
    { runId: c.runId, sessionId: "", payload: { case: "policyChangeApplied", value } },
    0,
    GENESIS_HASH,
    at,
  ).json;
}
