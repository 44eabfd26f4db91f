/**
 * Turns a rule derived from an approved call into a pending policy change: the diff
 * against the tenant's policy file as it is on disk now (the server's when the tenant has
 * none: `needsTenantFile`, and applying is refused until the auth file names one), stored
 * durably, announced as `policy.change_proposed`. One change per approval and version of
 * the file: its id is derived from both, so a retried ResolveApproval finds the change it
 * made, and one made again after the file changed (the first went stale) is a new one.
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
import { editPolicy, ruleText, sha256Hex } from "./policy-edit.ts";
import type { StoredPolicyChange, StoredRule } from "./port.ts";

/**
 * The change id of an approval's rule against a file version: "pc_" and 20 hex digits of
 * sha256(approval id, the file's sha256).
 */
export function changeIdOf(approvalId: string, baseSha256: string): string {
  const h = createHash("sha256").update("policy-change\0").update(approvalId);
  return `pc_${h.update("\0").update(baseSha256).digest("hex").slice(0, 20)}`;
}

export interface Proposal {
  tenantId: string;
  rule: StoredRule;
  proposedBy: string;
  approvalId: string;
  runId: string;
  callId: string;
}

/** The tenant's policy file now: where it is, its bytes, and the policy they load as. */
function readChosen(deps: PolicyChangesDeps, tenantId: string) {
  const chosen = deps.chosen(tenantId);
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
      `the policy file in force for tenant ${tenantId} does not load as it is now (${parsed.errors[0]?.field}: ${parsed.errors[0]?.message}): fix it before proposing rules`,
      { field: "propose_rule" },
    );
  return { chosen, bytes, policy: parsed.policy };
}

/**
 * The change `p` makes against the tenant's file as it is now: the stored one when this
 * approval proposed it against this file version before (`stored`), else a new one to
 * store. Throws ECONFLICT when the approval proposed another rule against this version,
 * when the policy already has the rule, or when its file does not load now.
 */
export async function prepareChange(
  deps: PolicyChangesDeps,
  p: Proposal,
): Promise<{ change: StoredPolicyChange; stored: boolean }> {
  const { chosen, bytes, policy } = readChosen(deps, p.tenantId);
  const id = changeIdOf(p.approvalId, sha256Hex(bytes));
  const held = await deps.store.get(id);
  if (held !== undefined) {
    if (ruleText(held.rule) !== ruleText(p.rule))
      throw new AgentdError(
        "ECONFLICT",
        `approval ${p.approvalId} already proposed ${held.id} (${ruleText(held.rule)})`,
        { field: "propose_rule.kind" },
      );
    return { change: held, stored: true };
  }
  const edit = editPolicy(chosen.path, bytes, policy, p.rule, {
    changeId: id,
    proposedBy: p.proposedBy,
    approvalId: p.approvalId,
  });
  const change: StoredPolicyChange = {
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
  return { change, stored: false };
}

/** Stores a prepared change and announces it (once: one stored before is answered as it was). */
export async function storeChange(
  deps: PolicyChangesDeps,
  p: { change: StoredPolicyChange; stored: boolean },
): Promise<StoredPolicyChange> {
  if (p.stored) return p.change;
  const c = p.change;
  const stored = await deps.store.propose(c);
  if (stored.proposedAt === c.proposedAt && stored.proposedBy === c.proposedBy)
    await deps.publish(stored.tenantId, stored.runId, proposedNotice(stored));
  return stored;
}
