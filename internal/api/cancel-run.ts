/**
 * CancelRun. Never lost, and never FAILED_PRECONDITION for a live run:
 * - a queued or paused run has no owner, so the server ends it itself (`run.cancelled`, a
 *   compare-and-append on the head it read, so it never lands on top of a worker's
 *   `run.resumed`) and takes it off the queue; when the head moved (a worker claimed or
 *   resumed it), it reads the run again and goes on from its new state, with jittered
 *   backoff, a bounded number of times;
 * - a running run gets `run.cancel_requested` (unconditional: the log refuses it only once
 *   the run ended) and the call follows the log until the owner's terminal event, bounded by
 *   the client's deadline and the server's limit (ApiDeps.cancelWaitMs);
 * - an ended run is answered as it ended (CANCELLED, COMPLETED or FAILED).
 * The answer is the run as it then is: ended, or RUNNING with `cancel_requested` set. When
 * every attempt of the server's own cancel lost a race, the request is recorded as
 * `run.cancel_requested` so whoever drives the run next ends it.
 *
 * Must never append after a terminal event (the log refuses it anyway: EENDED is a state
 * to read again, not an error to report).
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import type { Principal } from "../auth/tokens.ts";
import { invalid, isAgentdError } from "../errors.ts";
import type { LoggedEvent } from "../eventlog/event-codec.ts";
import type { RunHead } from "../eventlog/port.ts";
import { isRunEnded } from "../eventlog/run-ended-error.ts";
import { RunCancelledSchema, RunCancelRequestedSchema } from "../gen/agentd/v1/events_pb.js";
import {
  type CancelRunRequest,
  type CancelRunResponseSchema,
  type Run,
  RunState,
} from "../gen/agentd/v1/run_service_pb.js";
import { applyEvent, isTerminal } from "../projections/run-projection.ts";
import { principalOf } from "./context.ts";
import { type ApiDeps, DEFAULT_CANCEL_WAIT_MS, runOf } from "./deps.ts";
import { textField } from "./validate.ts";

/**
 * Reads-and-appends before the server gives up cancelling a run itself. Each lost race
 * means the run changed state (claimed, resumed, paused), which happens a few times at most.
 */
const MAX_ATTEMPTS = 12;
/** Backoff after a lost race: full jitter up to min(CAP, BASE * 2^attempt), so racers spread out. */
const BACKOFF_BASE_MS = 5;
const BACKOFF_CAP_MS = 250;
/** Share of the client's remaining deadline kept for the answer to reach it (at most 1 s). */
const REPLY_SHARE = 0.1;

interface Call {
  deps: ApiDeps;
  principal: Principal;
  runId: string;
  reason: string;
  /** Aborts when the wait is over: client deadline, server limit, or the call cancelled. */
  signal: AbortSignal;
}

/** Longest wait a timer can express (setTimeout fires at once above 2^31-1 ms). */
const MAX_WAIT_MS = 2 ** 31 - 1;

export function cancelRunHandler(deps: ApiDeps) {
  const limit = deps.cancelWaitMs ?? DEFAULT_CANCEL_WAIT_MS;
  if (!Number.isInteger(limit) || limit < 0 || limit > MAX_WAIT_MS) {
    throw invalid("cancelWaitMs", `must be an integer 0..${MAX_WAIT_MS} ms, got ${limit}`);
  }
  return async (
    req: CancelRunRequest,
    ctx: HandlerContext,
  ): Promise<MessageInitShape<typeof CancelRunResponseSchema>> => {
    const principal = principalOf(ctx);
    textField("reason", req.reason, 4096);
    const wait = waitBudget(ctx, limit);
    const signal = AbortSignal.any([ctx.signal, AbortSignal.timeout(wait)]);
    const call: Call = { deps, principal, runId: req.runId, reason: req.reason, signal };
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const { head, run } = await runOf(deps, principal, req.runId);
      const done = await cancelStep(call, head, run);
      if (done !== undefined) return { run: done };
      if (attempt + 1 === MAX_ATTEMPTS) break;
      // Not cut short by the end of the wait: a run found paused when the wait ran out is
      // still cancelled here (each try is quick; only a running run is waited for).
      await sleep(Math.random() * Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** attempt));
    }
    return { run: await recordRequest(call) };
  };
}

/** The wait allowed by the server's limit and the client's deadline (minus time to reply). */
function waitBudget(ctx: HandlerContext, limitMs: number): number {
  const left = ctx.timeoutMs();
  const budget =
    left === undefined ? limitMs : Math.min(limitMs, left - Math.min(1000, left * REPLY_SHARE));
  return Math.max(0, Math.floor(budget));
}

/**
 * One try from the state just read: the run to answer with, or undefined when the run
 * moved under this try (read again and go on from its new state).
 */
async function cancelStep(call: Call, head: RunHead, run: Run): Promise<Run | undefined> {
  if (isTerminal(run.state)) return run;
  if (run.state === RunState.RUNNING) {
    if (!run.cancelRequested) {
      const ev = await landedOrUndefined(appendRequest(call, head));
      if (ev === undefined) return undefined;
    }
    // From the head the run was read at, not from the request: an owner that paused the
    // run just before the request landed must be seen (it will not end the run).
    return untilEnded(call, run, head.seq);
  }
  // Queued or paused: nobody drives it, so the server ends it, unless the head moved.
  const ev = await landedOrUndefined(
    call.deps.log.append({
      runId: call.runId,
      sessionId: head.sessionId,
      expectedSeq: head.seq,
      payload: {
        case: "runCancelled",
        value: create(RunCancelledSchema, {
          reason: call.reason,
          cancelledBy: call.principal.name,
        }),
      },
    }),
  );
  if (ev === undefined) return undefined;
  // Best effort: the log says cancelled, and a claim drops a run that ended in the log, so
  // a failed removal only leaves the entry for the next claim (or the sweep) to drop.
  await call.deps.queue?.cancelQueued(call.runId).catch(() => false);
  return applyEvent(run, ev.event);
}

function appendRequest(call: Call, head: RunHead): Promise<LoggedEvent> {
  return call.deps.log.append({
    runId: call.runId,
    sessionId: head.sessionId,
    payload: {
      case: "runCancelRequested",
      value: create(RunCancelRequestedSchema, {
        reason: call.reason,
        requestedBy: call.principal.name,
      }),
    },
  });
}

/** The appended event, or undefined when the run moved on (ECONFLICT) or ended (EENDED). */
async function landedOrUndefined(p: Promise<LoggedEvent>): Promise<LoggedEvent | undefined> {
  try {
    return await p;
  } catch (err) {
    if (isRunEnded(err) || isAgentdError(err, "ECONFLICT")) return undefined;
    throw err;
  }
}

/**
 * Follows the run's log after `afterSeq` (`run` is projected up to it) until its terminal
 * event or the end of the wait; the run as it then is. Undefined when the run paused
 * meanwhile (its owner let go before it saw the request): nobody would end it, so the
 * server must.
 */
async function untilEnded(call: Call, run: Run, afterSeq: number): Promise<Run | undefined> {
  try {
    for await (const ev of call.deps.log.follow(call.runId, afterSeq, call.signal)) {
      applyEvent(run, ev.event);
      if (isTerminal(run.state)) return run;
      if (run.state === RunState.PAUSED) return undefined;
    }
  } catch (err) {
    if (!call.signal.aborted) throw err;
  }
  // The wait is over (the follow may have stopped short of the request): as it is now.
  return (await runOf(call.deps, call.principal, call.runId)).run;
}

/**
 * Every try lost a race (or the wait ran out between tries): the request is recorded
 * unconditionally, so it is never lost; the run as it is. An ended run needs none.
 */
async function recordRequest(call: Call): Promise<Run> {
  // At most twice round: an unconditional append fails only when the run ended.
  for (;;) {
    const { head, run } = await runOf(call.deps, call.principal, call.runId);
    if (isTerminal(run.state) || run.cancelRequested) return run;
    const ev = await landedOrUndefined(appendRequest(call, head));
    if (ev !== undefined) return applyEvent(run, ev.event);
  }
}
