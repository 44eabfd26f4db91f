/**
 * PurgeTenant (admin): every ended run of a tenant deleted as DeleteRun does (one
 * `run.deleted` each), then `tenant.purged` in the feed. Refused (FAILED_PRECONDITION) while
 * the tenant has live runs: an operator cancels them first — a purge never ends a run's work
 * on its own. Streams progress after every PROGRESS_EVERY runs; an interrupted purge is
 * resumed by calling it again (what was deleted is gone from the index, what was half
 * deleted is finished). The tenant's upload receipts are dropped last, with their blobs
 * where nothing else references them, and its policy changes (pending or settled). Runs created while a purge runs are not part of it.
 * Must never: delete a live run, or record `tenant.purged` when runs were left behind.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { TENANT_RE } from "../auth/tokens.ts";
import { AgentdError, invalid, isAgentdError } from "../errors.ts";
import type {
  PurgeTenantRequest,
  PurgeTenantResponseSchema,
} from "../gen/agentd/v1/run_service_pb.js";
import { deleteRun } from "../lifecycle/delete-run.ts";
import { dropTenantReceipts } from "../lifecycle/expire-receipts.ts";
import { tenantPurgedNotice } from "../lifecycle/notices.ts";
import { principalOf } from "./context.ts";
import { deletionReason } from "./deletion-reason.ts";
import type { ApiDeps } from "./deps.ts";

/** A progress message after this many runs deleted. */
export const PROGRESS_EVERY = 50;
const PAGE = 500;
/** Live runs named in the refusal, at most. */
const NAMED = 5;

type Progress = MessageInitShape<typeof PurgeTenantResponseSchema>;

export function purgeTenantHandler(deps: ApiDeps) {
  return async function* (req: PurgeTenantRequest, ctx: HandlerContext): AsyncGenerator<Progress> {
    const principal = principalOf(ctx);
    if (!principal.roles.has("admin"))
      throw new AgentdError("EPERMISSION", "PurgeTenant needs the 'admin' role");
    if (req.tenantId === "") throw invalid("tenant_id", "is required");
    if (!TENANT_RE.test(req.tenantId))
      throw invalid("tenant_id", "must match [a-z0-9][a-z0-9_-]{0,62}");
    deletionReason("reason", req.reason);
    const deletion = deps.deletion;
    if (deletion === undefined)
      throw new AgentdError("EUNIMPLEMENTED", "this server cannot delete runs");
    const ids = await tenantRunIds(deps, req.tenantId, ctx.signal);
    await refuseLive(deps, req.tenantId, ids);
    const hook = deps.beforeDelete === undefined ? {} : { beforeDelete: deps.beforeDelete };
    let deleted = 0;
    let last = "";
    for (const runId of ids) {
      ctx.signal.throwIfAborted();
      try {
        await deleteRun(
          deletion,
          { runId, tenantId: req.tenantId, by: principal.name, reason: req.reason },
          hook,
        );
      } catch (err) {
        // Gone meanwhile (another deletion, retention): nothing left to do for it.
        if (isAgentdError(err) && err.code === "ENOTFOUND") continue;
        throw err;
      }
      deleted++;
      last = runId;
      if (deleted % PROGRESS_EVERY === 0) yield { runsDeleted: BigInt(deleted), lastRunId: last };
    }
    // The tenant's upload receipts go too: each kept its workspace blob (and the tenant's
    // artifactBytes) until its TTL.
    await dropTenantReceipts(deletion, req.tenantId);
    // Pending and settled policy changes hold the tenant's commands and run ids.
    await deps.policyChanges?.store.dropTenant(req.tenantId);
    const notice = tenantPurgedNotice({
      tenantId: req.tenantId,
      by: principal.name,
      reason: req.reason,
      runsDeleted: deleted,
      at: Date.now(),
    });
    await deps.log.publish(req.tenantId, "", notice);
    yield { runsDeleted: BigInt(deleted), lastRunId: last, done: true };
  };
}

/** Every run id of the tenant's index, newest first (ids only: about 30 bytes a run). */
async function tenantRunIds(deps: ApiDeps, tenantId: string, signal: AbortSignal) {
  const ids: string[] = [];
  let before: string | undefined;
  do {
    signal.throwIfAborted();
    const page = await deps.log.listRunIds({
      tenantId,
      limit: PAGE,
      ...(before === undefined ? {} : { before }),
    });
    ids.push(...page.runIds);
    before = page.next;
  } while (before !== undefined);
  return ids;
}

/** FAILED_PRECONDITION naming the live runs (a run being deleted has no head: not live). */
async function refuseLive(deps: ApiDeps, tenantId: string, ids: readonly string[]) {
  const live: string[] = [];
  for (let i = 0; i < ids.length; i += PAGE) {
    const heads = await deps.log.heads(ids.slice(i, i + PAGE));
    for (const h of heads) if (h !== undefined && h.ended === undefined) live.push(h.runId);
  }
  if (live.length === 0) return;
  const named = live.slice(0, NAMED).join(", ");
  throw new AgentdError(
    "ECONFLICT",
    `tenant ${tenantId} has ${live.length} live run${live.length === 1 ? "" : "s"} (${named}${live.length > NAMED ? ", …" : ""}): cancel them first, then purge`,
    { field: "tenant_id" },
  );
}
