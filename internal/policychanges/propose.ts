/**
 * Turns a rule derived from an approved call into a pending policy change: the diff
 * against the tenant's policy file as it is on disk now (the server's when the tenant has
 * none: `needsTenantFile`, and applying is refused until the auth file names one), stored
 * durably, announced as `policy.change_proposed`. One change per approval: its id is
 * derived from the approval id, so a retried ResolveApproval finds the change it made.
 *
 * Must never: change a policy file (only ApplyPolicyChange does), or store a change whose
 * file would not load.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { AgentdError } from "../errors.ts";
import { parsePolicy, resolveRelative } from "../kernel/policy-loader.ts";
import type { PolicyChangesDeps } from "./deps.ts";
import { proposedNotice } from "./messages.ts";
import { editPolicy, ruleText } from "./policy-edit.ts";
import type { StoredPolicyChange, StoredRule } from "./port.ts";

/** The change id of an approval's rule: "pc_" and 20 hex digits of sha256(approval id). */
export function changeIdOf(approvalId: string): string {
  return `pc_${createHash("sha256").update("policy-change\0").update(approvalId).digest("hex").slice(0, 20)}`;
}

export interface Proposal {
  tenantId: string;
  rule: StoredRule;
  proposedBy: string;
  approvalId: string;
  runId: string;
  callId: string;
}

/**
 * The change `p` would be, computed from the tenant's file now (nothing stored). Throws
 * ECONFLICT when the policy already has the rule or its file does not load now.
 */
export function prepareChange(deps: PolicyChangesDeps, p: Proposal): StoredPolicyChange {
  const id = changeIdOf(p.approvalId);
  const chosen = deps.chosen(p.tenantId);
  let bytes: Buffer;
  try {
    bytes = readFileSync(chosen.path);
  } catch (err) {
    throw new AgentdError("EIO", `cannot read the policy file: ${(err as Error).message}`, {
      cause: err,
    });
  }
  const parsed = parsePolicy(bytes.toString("utf8"), chosen.path, resolveRelative);
  if (!parsed.ok)
    throw new AgentdError(
      "ECONFLICT",
      `the policy file in force for tenant ${p.tenantId} does not load as it is now (${parsed.errors[0]?.field}: ${parsed.errors[0]?.message}): fix it before proposing rules`,
      { field: "propose_rule" },
    );
  const edit = editPolicy(chosen.path, bytes, parsed.policy, p.rule, {
    changeId: id,
    proposedBy: p.proposedBy,
    approvalId: p.approvalId,
  });
  return {
    id,
    tenantId: p.tenantId,
    state: "pending",
    rule: p.rule,
    proposedBy: p.proposedBy,
    approvalId: p.approvalId,
    runId: p.runId,
    callId: p.callId,
    path: chosen.path,
    needsTenantFile: chosen.source !== "tenant",
    diff: edit.diff,
    baseSha256: edit.baseSha256,
    newText: edit.newText,
    proposedAt: (deps.now ?? Date.now)(),
  };
}

/**
 * Refuses a proposal for an approval whose change exists with another rule (one change per
 * approval); answers the existing change when it has this rule.
 */
export async function existingChange(
  deps: PolicyChangesDeps,
  approvalId: string,
  rule: StoredRule,
): Promise<StoredPolicyChange | undefined> {
  const held = await deps.store.get(changeIdOf(approvalId));
  if (held === undefined) return undefined;
  if (ruleText(held.rule) !== ruleText(rule))
    throw new AgentdError(
      "ECONFLICT",
      `approval ${approvalId} already proposed ${held.id} (${ruleText(held.rule)})`,
      { field: "propose_rule.kind" },
    );
  return held;
}

/** Stores `c` and announces it (once: a change stored before is answered as it was). */
export async function storeChange(
  deps: PolicyChangesDeps,
  c: StoredPolicyChange,
): Promise<StoredPolicyChange> {
  const stored = await deps.store.propose(c);
  if (stored.proposedAt === c.proposedAt && stored.proposedBy === c.proposedBy)
    await deps.publish(stored.tenantId, stored.runId, proposedNotice(stored));
  return stored;
}
