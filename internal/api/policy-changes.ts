/**
 * ListPolicyChanges (read: the caller's tenant; an admin's token every tenant's, or one),
 * ApplyPolicyChange and RejectPolicyChange (admin only, checked here again as PurgeTenant
 * does: the role gate is the first line, not the only one). The work is in
 * internal/policychanges.
 *
 * Must never: list or settle one tenant's changes for another's non-admin token.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import type { Principal } from "../auth/tokens.ts";
import { TENANT_RE } from "../auth/tokens.ts";
import { AgentdError, invalid } from "../errors.ts";
import type {
  ApplyPolicyChangeRequest,
  ApplyPolicyChangeResponseSchema,
  ListPolicyChangesRequest,
  ListPolicyChangesResponseSchema,
  RejectPolicyChangeRequest,
  RejectPolicyChangeResponseSchema,
} from "../gen/agentd/v1/run_service_pb.js";
import { applyChange, rejectChange } from "../policychanges/apply.ts";
import type { PolicyChangesDeps } from "../policychanges/deps.ts";
import { changeMessage } from "../policychanges/messages.ts";
import { principalOf } from "./context.ts";
import type { ApiDeps } from "./deps.ts";
import { textField } from "./validate.ts";

const CHANGE_ID_RE = /^pc_[a-f0-9]{20}$/;

function changesOf(deps: ApiDeps): PolicyChangesDeps {
  if (deps.policyChanges === undefined)
    throw new AgentdError("EUNIMPLEMENTED", "this server keeps no policy changes");
  return deps.policyChanges;
}

function adminOnly(principal: Principal, method: string): void {
  if (!principal.roles.has("admin"))
    throw new AgentdError("EPERMISSION", `${method} needs the 'admin' role`);
}

function changeIdField(id: string): string {
  if (id === "") throw invalid("change_id", "is required");
  if (!CHANGE_ID_RE.test(id)) throw invalid("change_id", "is not a policy change id (pc_…)");
  return id;
}

export function listPolicyChangesHandler(deps: ApiDeps) {
  return async (
    req: ListPolicyChangesRequest,
    ctx: HandlerContext,
  ): Promise<MessageInitShape<typeof ListPolicyChangesResponseSchema>> => {
    const principal = principalOf(ctx);
    const pc = changesOf(deps);
    if (req.tenantId !== "" && !TENANT_RE.test(req.tenantId))
      throw invalid("tenant_id", "must match [a-z0-9][a-z0-9_-]{0,62}");
    const admin = principal.roles.has("admin");
    if (!admin && req.tenantId !== "" && req.tenantId !== principal.tenantId)
      throw new AgentdError(
        "EPERMISSION",
        "tenant_id: only an admin lists another tenant's changes",
      );
    const tenant = admin ? (req.tenantId === "" ? undefined : req.tenantId) : principal.tenantId;
    const all = await pc.store.list(tenant);
    const shown = req.pendingOnly ? all.filter((c) => c.state === "pending") : all;
    return { changes: shown.map(changeMessage) };
  };
}

export function applyPolicyChangeHandler(deps: ApiDeps) {
  return async (
    req: ApplyPolicyChangeRequest,
    ctx: HandlerContext,
  ): Promise<MessageInitShape<typeof ApplyPolicyChangeResponseSchema>> => {
    const principal = principalOf(ctx);
    adminOnly(principal, "ApplyPolicyChange");
    const pc = changesOf(deps);
    const c = await applyChange(pc, changeIdField(req.changeId), principal.name);
    return { change: changeMessage(c), newDigest: c.newDigest ?? "" };
  };
}

export function rejectPolicyChangeHandler(deps: ApiDeps) {
  return async (
    req: RejectPolicyChangeRequest,
    ctx: HandlerContext,
  ): Promise<MessageInitShape<typeof RejectPolicyChangeResponseSchema>> => {
    const principal = principalOf(ctx);
    adminOnly(principal, "RejectPolicyChange");
    const pc = changesOf(deps);
    const id = changeIdField(req.changeId);
    textField("reason", req.reason, 1024);
    const c = await rejectChange(pc, id, principal.name, req.reason);
    return { change: changeMessage(c) };
  };
}
