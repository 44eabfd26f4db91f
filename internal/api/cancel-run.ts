/**
 * CancelRun. A queued run has no owner yet, so the server cancels it itself with a
 * compare-and-append on the head it read (a worker that claims it first wins, and the
 * caller gets FAILED_PRECONDITION to retry). Cancelling a run a worker owns needs the
 * worker's cancel path and answers UNIMPLEMENTED until then.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { AgentdError } from "../errors.ts";
import { RunCancelledSchema } from "../gen/agentd/v1/events_pb.js";
import {
  type CancelRunRequest,
  type CancelRunResponseSchema,
  RunState,
} from "../gen/agentd/v1/run_service_pb.js";
import { applyEvent, isTerminal } from "../projections/run-projection.ts";
import { principalOf } from "./context.ts";
import { type ApiDeps, runOf } from "./deps.ts";
import { textField } from "./validate.ts";

export function cancelRunHandler(deps: ApiDeps) {
  return async (
    req: CancelRunRequest,
    ctx: HandlerContext,
  ): Promise<MessageInitShape<typeof CancelRunResponseSchema>> => {
    const principal = principalOf(ctx);
    textField("reason", req.reason, 4096);
    const { head, run } = await runOf(deps, principal, req.runId);
    if (isTerminal(run.state)) {
      if (run.state === RunState.CANCELLED) return { run };
      throw new AgentdError("ECONFLICT", `run ${req.runId} already ended (${RunState[run.state]})`);
    }
    if (run.state !== RunState.QUEUED) {
      throw new AgentdError(
        "EUNIMPLEMENTED",
        "cancelling a run that a worker owns needs the worker's cancel path (issue: Workers); only queued runs can be cancelled yet",
      );
    }
    const ev = await deps.log.append({
      runId: req.runId,
      sessionId: head.sessionId,
      expectedSeq: head.seq,
      payload: {
        case: "runCancelled",
        value: create(RunCancelledSchema, { reason: req.reason, cancelledBy: principal.name }),
      },
    });
    return { run: applyEvent(run, ev.event) };
  };
}
