/**
 * CancelRun. A queued or paused run has no owner, so the server cancels it itself with a
 * compare-and-append on the head it read (a worker that claims it first wins, and the
 * caller gets FAILED_PRECONDITION to retry) and takes it off the queue. A running run gets
 * `run.cancel_requested`: its owner kills the running tool, removes the container and
 * appends `run.cancelled`.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { AgentdError } from "../errors.ts";
import { RunCancelledSchema, RunCancelRequestedSchema } from "../gen/agentd/v1/events_pb.js";
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
    if (run.state === RunState.RUNNING) {
      const ev = await deps.log.append({
        runId: req.runId,
        sessionId: head.sessionId,
        payload: {
          case: "runCancelRequested",
          value: create(RunCancelRequestedSchema, {
            reason: req.reason,
            requestedBy: principal.name,
          }),
        },
      });
      return { run: applyEvent(run, ev.event) };
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
    await deps.queue?.cancelQueued(req.runId);
    return { run: applyEvent(run, ev.event) };
  };
}
