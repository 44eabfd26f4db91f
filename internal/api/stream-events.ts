/**
 * StreamEvents: the run's events after `after_seq`, then live ones until the terminal
 * event (or only the stored ones with `history_only`). Resuming from the last seq a
 * client saw gives every later event exactly once.
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { WireType } from "@bufbuild/protobuf/wire";
import type { HandlerContext } from "@connectrpc/connect";
import type { Principal } from "../auth/tokens.ts";
import { AgentdError, invalid } from "../errors.ts";
import type { LoggedEvent } from "../eventlog/event-codec.ts";
import { TERMINAL_TYPES } from "../eventlog/event-codec.ts";
import {
  type StreamEventsRequest,
  StreamEventsResponseSchema,
} from "../gen/agentd/v1/run_service_pb.js";
import { isTerminal } from "../projections/run-projection.ts";
import { principalOf } from "./context.ts";
import { type ApiDeps, runOf } from "./deps.ts";

/**
 * The events a client asked for, as stored: shared by the gRPC stream and the SSE endpoint.
 * Validates `afterSeq` (negative: INVALID_ARGUMENT, past the last seq: OUT_OF_RANGE) and
 * the run (NOT_FOUND) before it resolves, so a caller can answer errors before it starts a
 * response, and start one without waiting for the next event.
 */
export async function openRunEvents(
  deps: ApiDeps,
  principal: Principal,
  runId: string,
  afterSeq: bigint | number,
  historyOnly: boolean,
  signal: AbortSignal,
): Promise<AsyncIterable<LoggedEvent>> {
  const { after, live } = await checkRunEvents(deps, principal, runId, afterSeq, historyOnly);
  return live ? liveEvents(deps, runId, after, signal) : storedEvents(deps, runId, after);
}

/** Validates a stream request; `live` is false when only stored events will come. */
async function checkRunEvents(
  deps: ApiDeps,
  principal: Principal,
  runId: string,
  afterSeq: bigint | number,
  historyOnly: boolean,
): Promise<{ after: number; live: boolean }> {
  if (afterSeq < 0) throw invalid("after_seq", "must not be negative");
  const { head, run } = await runOf(deps, principal, runId);
  if (BigInt(afterSeq) > BigInt(head.seq)) {
    throw new AgentdError(
      "EOUTOFRANGE",
      `after_seq ${afterSeq} is beyond the run's last seq ${head.seq}`,
      { field: "after_seq" },
    );
  }
  // Nothing will follow a terminal event: serve what is stored and end.
  return { after: Number(afterSeq), live: !(historyOnly || isTerminal(run.state)) };
}

/** openRunEvents as one generator: errors surface on the first step. */
export async function* runEvents(
  deps: ApiDeps,
  principal: Principal,
  runId: string,
  afterSeq: bigint | number,
  historyOnly: boolean,
  signal: AbortSignal,
): AsyncGenerator<LoggedEvent> {
  yield* await openRunEvents(deps, principal, runId, afterSeq, historyOnly, signal);
}

async function* storedEvents(deps: ApiDeps, runId: string, after: number) {
  let last = after;
  for (;;) {
    const page = await deps.log.read(runId, last, 1000);
    for (const ev of page) yield ev;
    if (page.length < 1000) return;
    last = page[page.length - 1]?.seq ?? last;
  }
}

async function* liveEvents(deps: ApiDeps, runId: string, after: number, signal: AbortSignal) {
  for await (const ev of deps.log.follow(runId, after, signal)) {
    yield ev;
    if (TERMINAL_TYPES.has(ev.type)) return;
  }
}

export function streamEventsHandler(deps: ApiDeps) {
  return async function* (
    req: StreamEventsRequest,
    ctx: HandlerContext,
  ): AsyncGenerator<MessageInitShape<typeof StreamEventsResponseSchema>> {
    const principal = principalOf(ctx);
    // Fan-out: with a binary codec, the response carries the event's cached encoding as
    // field 1 in $unknown, which the serializer copies as raw bytes — identical on the wire
    // to `{event}`, without re-encoding the same event for every subscriber. JSON codecs
    // (Connect with JSON) drop unknown fields, so they get the message itself.
    const binary = !/json/i.test(ctx.requestHeader.get("content-type") ?? "");
    const toResponse = (ev: LoggedEvent): MessageInitShape<typeof StreamEventsResponseSchema> => {
      if (!binary) return { event: ev.event };
      const res = create(StreamEventsResponseSchema);
      res.$unknown = [{ no: 1, wireType: WireType.LengthDelimited, data: ev.lengthPrefixedBinary }];
      return res;
    };
    const { after, live } = await checkRunEvents(
      deps,
      principal,
      req.runId,
      req.afterSeq,
      req.historyOnly,
    );
    if (!live) {
      for await (const ev of storedEvents(deps, req.runId, after)) yield toResponse(ev);
      return;
    }
    // The hot path of fan-out: straight from the log's follower, no further generators.
    for await (const ev of deps.log.follow(req.runId, after, ctx.signal)) {
      yield toResponse(ev);
      if (TERMINAL_TYPES.has(ev.type)) return;
    }
  };
}
