/** Registers agentd.v1.RunService: one handler per file, wired here. */
import type { ConnectRouter } from "@connectrpc/connect";
import { RunService } from "../gen/agentd/v1/run_service_pb.js";
import { listApprovalsHandler, resolveApprovalHandler } from "./approvals.ts";
import { cancelRunHandler } from "./cancel-run.ts";
import { principalOf } from "./context.ts";
import { createRunHandler } from "./create-run.ts";
import { deleteRunHandler } from "./delete-run.ts";
import type { ApiDeps } from "./deps.ts";
import { getArtifactHandler } from "./get-artifact.ts";
import { getRunHandler } from "./get-run.ts";
import { listRunsHandler } from "./list-runs.ts";
import { overrideReviewHandler } from "./override-review.ts";
import {
  applyPolicyChangeHandler,
  listPolicyChangesHandler,
  rejectPolicyChangeHandler,
} from "./policy-changes.ts";
import { purgeTenantHandler } from "./purge-tenant.ts";
import { streamEventsHandler } from "./stream-events.ts";
import { uploadWorkspaceHandler } from "./upload-workspace.ts";
import { watchEventsHandler } from "./watch-events.ts";

export function registerRunService(router: ConnectRouter, deps: ApiDeps): void {
  router.service(RunService, {
    createRun: createRunHandler(deps),
    getRun: getRunHandler(deps),
    listRuns: listRunsHandler(deps),
    streamEvents: streamEventsHandler(deps),
    resolveApproval: resolveApprovalHandler(deps),
    listApprovals: listApprovalsHandler(deps),
    overrideReview: overrideReviewHandler(deps),
    cancelRun: cancelRunHandler(deps),
    getArtifact: getArtifactHandler(deps),
    uploadWorkspace: uploadWorkspaceHandler(deps),
    watchEvents: watchEventsHandler(deps),
    deleteRun: deleteRunHandler(deps),
    purgeTenant: purgeTenantHandler(deps),
    listPolicyChanges: listPolicyChangesHandler(deps),
    applyPolicyChange: applyPolicyChangeHandler(deps),
    rejectPolicyChange: rejectPolicyChangeHandler(deps),
    whoAmI: (_req, ctx) => {
      const p = principalOf(ctx);
      return { tenantId: p.tenantId, principal: p.name, roles: [...p.roles].sort() };
    },
  });
}
