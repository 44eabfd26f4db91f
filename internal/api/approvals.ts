/** ResolveApproval and ListApprovals: they arrive with the kernel; until then, UNIMPLEMENTED. */
import { AgentdError } from "../errors.ts";

const MISSING =
  "approvals arrive with the policy kernel (issue: Kernel — policy.yaml, previews, approvals); no run can request one yet";

export function resolveApprovalHandler() {
  return async (): Promise<never> => {
    throw new AgentdError("EUNIMPLEMENTED", `ResolveApproval: ${MISSING}`);
  };
}

export function listApprovalsHandler() {
  return async (): Promise<never> => {
    throw new AgentdError("EUNIMPLEMENTED", `ListApprovals: ${MISSING}`);
  };
}
