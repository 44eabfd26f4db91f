/**
 * ResolveApproval's `propose_rule`: the rule derived from the approved call (as the run's
 * log records it) and the pending policy change it becomes. Prepared before the approval
 * is appended, so a call that cannot give a rule refuses the whole request (nothing is
 * resolved); stored after it, idempotently (one change per approval).
 *
 * Must never: take the rule from the request, or propose for a denial.
 */
import type { Principal } from "../auth/tokens.ts";
import { AgentdError, invalid } from "../errors.ts";
import { ApprovalDecision, type ProposedRule } from "../gen/agentd/v1/events_pb.js";
import { REPO_LABEL } from "../kernel/trust-store.ts";
import type { PolicyChangesDeps } from "../policychanges/deps.ts";
import { checkProposal, deriveRule } from "../policychanges/derive-rule.ts";
import type { StoredPolicyChange } from "../policychanges/port.ts";
import { prepareChange, storeChange } from "../policychanges/propose.ts";
import type { ApprovalState } from "../projections/approvals.ts";
import { type ApiDeps, runOf } from "./deps.ts";

export interface RuleRequest {
  kind: "command" | "host";
  deps: PolicyChangesDeps;
}

/** Checks `propose_rule` of a request up front (undefined: none asked for). */
export function ruleRequest(
  deps: ApiDeps,
  p: ProposedRule | undefined,
  decision: ApprovalDecision,
): RuleRequest | undefined {
  if (p === undefined) return undefined;
  const kind = checkProposal(p);
  if (decision !== ApprovalDecision.APPROVE)
    throw invalid("propose_rule", "only with APPROVAL_DECISION_APPROVE: a denial proposes no rule");
  if (deps.policyChanges === undefined)
    throw new AgentdError("EUNIMPLEMENTED", "this server keeps no policy changes");
  return { kind, deps: deps.policyChanges };
}

/** The change the approval proposes: the stored one, or a new one to store after the append. */
export async function prepareProposal(
  deps: ApiDeps,
  principal: Principal,
  r: RuleRequest,
  a: ApprovalState,
): Promise<{ change: StoredPolicyChange; stored: boolean }> {
  const { run } = await runOf(deps, principal, a.runId);
  const events = (await deps.log.read(a.runId, 0)).map((e) => e.event);
  const rule = deriveRule(r.kind, a, events, run.labels[REPO_LABEL]);
  return prepareChange(r.deps, {
    tenantId: run.tenantId,
    rule,
    proposedBy: principal.name,
    approvalId: a.approvalId,
    runId: a.runId,
    callId: a.callId,
  });
}

/** Stores a prepared change (and announces it) unless it was stored already. */
export async function finishProposal(
  r: RuleRequest,
  p: { change: StoredPolicyChange; stored: boolean },
): Promise<void> {
  await storeChange(r.deps, p);
}
