/**
 * DeleteRun: an ended run deleted for good (internal/lifecycle/delete-run.ts), recorded as
 * `run.deleted` in the tenant feed. A token of the run's tenant with the submit role deletes
 * its tenant's runs (another tenant's: NOT_FOUND, as everywhere); an admin any tenant's.
 * A live run is FAILED_PRECONDITION naming its state ("cancel it first").
 * Must never: delete a live run, or tell a caller whether another tenant's run exists.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { AgentdError } from "../errors.ts";
import type { DeleteRunRequest, DeleteRunResponseSchema } from "../gen/agentd/v1/run_service_pb.js";
import { deleteRun } from "../lifecycle/delete-run.ts";
import { principalOf } from "./context.ts";
import { deletionReason } from "./deletion-reason.ts";
import type { ApiDeps } from "./deps.ts";
import { runIdField } from "./validate.ts";

export function deleteRunHandler(deps: ApiDeps) {
  return async (
    req: DeleteRunRequest,
    ctx: HandlerContext,
  ): Promise<MessageInitShape<typeof DeleteRunResponseSchema>> => {
    const principal = principalOf(ctx);
    runIdField("run_id", req.runId);
    deletionReason("reason", req.reason);
    const deletion = deps.deletion;
    if (deletion === undefined)
      throw new AgentdError("EUNIMPLEMENTED", "this server cannot delete runs");
    const admin = principal.roles.has("admin");
    const done = await deleteRun(
      deletion,
      {
        runId: req.runId,
        tenantId: admin ? undefined : principal.tenantId,
        by: principal.name,
        reason: req.reason,
      },
      deps.beforeDelete === undefined ? {} : { beforeDelete: deps.beforeDelete },
    );
    return {
      runId: req.runId,
      tenantId: done.tombstone.tenantId,
      deletedNow: done.began,
      artifactsRemoved: BigInt(done.removedBlobs),
    };
  };
}
