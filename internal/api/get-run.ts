/** GetRun: the run's projection, scoped to the caller's tenant; a queued run's standing. */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import type { GetRunRequest, GetRunResponseSchema } from "../gen/agentd/v1/run_service_pb.js";
import { principalOf } from "./context.ts";
import { type ApiDeps, runOf } from "./deps.ts";
import { addQueueStanding } from "./queue-standing.ts";

export function getRunHandler(deps: ApiDeps) {
  return async (
    req: GetRunRequest,
    ctx: HandlerContext,
  ): Promise<MessageInitShape<typeof GetRunResponseSchema>> => {
    const { run } = await runOf(deps, principalOf(ctx), req.runId);
    await addQueueStanding(deps, run);
    return { run };
  };
}
