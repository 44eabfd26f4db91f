/** GetRun: the run's projection, scoped to the caller's tenant; a queued run's position. */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import {
  type GetRunRequest,
  type GetRunResponseSchema,
  RunState,
} from "../gen/agentd/v1/run_service_pb.js";
import { principalOf } from "./context.ts";
import { type ApiDeps, runOf } from "./deps.ts";

export function getRunHandler(deps: ApiDeps) {
  return async (
    req: GetRunRequest,
    ctx: HandlerContext,
  ): Promise<MessageInitShape<typeof GetRunResponseSchema>> => {
    const { run } = await runOf(deps, principalOf(ctx), req.runId);
    if (run.state === RunState.QUEUED && deps.queue !== undefined) {
      // Where it stands: behind the earlier runs of its session, and among all queued runs.
      const pos = await deps.queue.positionOf(run.runId);
      if (pos !== undefined) {
        run.queuePosition = pos.overall;
        run.sessionPosition = pos.session;
      }
    }
    return { run };
  };
}
