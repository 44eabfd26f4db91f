/**
 * StreamEvents: the run's events after `after_seq`, then live ones until the terminal
 * event (or only the stored ones with `history_only`). Resuming from the last seq a
 * client saw gives every later event exactly once.
 *
 * Resync: when the stored log lost events this stream already sent (Redis lost acknowledged
 * writes), the stream ends with DATA_LOSS (EREWOUND) instead of sending events of another
 * chain; the client drops what it holds past the stored head and reads the run again
 * (docs/api.md, "Resync"). Counted as agentd_log_rewound_total{found_by="follower"}.
 */
import type { Http2Stream } from "node:http2";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { WireType } from "@bufbuild/protobuf/wire";
import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import type { Principal } from "../auth/tokens.ts";
import { AgentdError, invalid } from "../errors.ts";
import type { LoggedEvent } from "../eventlog/event-codec.ts";
import { TERMINAL_TYPES } from "../eventlog/event-codec.ts";
import { isLogRewound } from "../eventlog/log-rewound-error.ts";
import {
  type StreamEventsRequest,
  StreamEventsResponseSchema,
} from "../gen/agentd/v1/run_service_pb.js";
import { isTerminal } from "../projections/run-projection.ts";
import { metrics } from "../telemetry/metrics.ts";
import { kHttp2Stream, principalOf } from "./context.ts";
import { type ApiDeps, runOf } from "./deps.ts";
import { throwIfDeleted, watchRunGone } from "./run-gone.ts";

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

async function* storedEvents(deps: ApiDeps, runId: string, after: number) {
  let last = after;
  for (;;) {
    const page = await deps.log.read(runId, last, 1000);
    for (const ev of page) yield ev;
    if (page.length < 1000) {
      // A run deleted while it was read: its stream ends NOT_FOUND, never short and OK.
      await throwIfDeleted(deps, runId);
      return;
    }
    last = page[page.length - 1]?.seq ?? last;
  }
}

/** A follow whose end by EREWOUND (the store lost events it sent) is counted. */
async function* counted<T>(it: AsyncIterable<T>): AsyncGenerator<T> {
  try {
    yield* it;
  } catch (err) {
    if (isLogRewound(err)) metrics.logRewound.inc({ found_by: "follower" });
    throw err;
  }
}

async function* liveEvents(deps: ApiDeps, runId: string, after: number, signal: AbortSignal) {
  const gone = watchRunGone(deps, runId, signal);
  try {
    for await (const ev of counted(deps.log.follow(runId, after, gone.signal))) {
      yield ev;
      if (TERMINAL_TYPES.has(ev.type)) return;
    }
    gone.throwIfGone();
  } finally {
    gone.stop();
  }
}

/** Messages at least this big are compressed when the response is (connect's default). */
const COMPRESS_MIN_BYTES = 1024;

export function streamEventsHandler(deps: ApiDeps) {
  const stream = streamRunEvents(deps);
  return async function* (
    req: StreamEventsRequest,
    ctx: HandlerContext,
  ): AsyncGenerator<MessageInitShape<typeof StreamEventsResponseSchema>> {
    const open = metrics.streamsOpen.labels({ kind: "grpc" });
    open.inc();
    try {
      yield* stream(req, ctx);
    } finally {
      open.dec();
    }
  };
}

function streamRunEvents(deps: ApiDeps) {
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
    const gone = watchRunGone(deps, req.runId, ctx.signal);
    let ended: boolean;
    try {
      ended = yield* followLive(req, ctx, after, binary, toResponse, gone.signal);
    } finally {
      gone.stop();
    }
    if (ended) return;
    // The follow stopped before the terminal event: the run was deleted (NOT_FOUND), or
    // the call's signal fired.
    gone.throwIfGone();
    throw stoppedBy(ctx.signal);
  };

  /** Live events until the terminal one (true) or until `signal` stops the follow (false). */
  async function* followLive(
    req: StreamEventsRequest,
    ctx: HandlerContext,
    after: number,
    binary: boolean,
    toResponse: (ev: LoggedEvent) => MessageInitShape<typeof StreamEventsResponseSchema>,
    signal: AbortSignal,
  ): AsyncGenerator<MessageInitShape<typeof StreamEventsResponseSchema>, boolean> {
    const stream = binary && ctx.protocolName === "grpc" ? ctx.values.get(kHttp2Stream) : undefined;
    if (stream === undefined) {
      // Connect, gRPC-Web, JSON, HTTP/1.1: every message through connect.
      for await (const ev of counted(deps.log.follow(req.runId, after, signal))) {
        yield toResponse(ev);
        if (TERMINAL_TYPES.has(ev.type)) return true;
      }
      return false;
    }
    // gRPC (binary) over HTTP/2, the hot path of fan-out. The first message goes through
    // connect, which sends the response headers with it; every later one is written to the
    // HTTP/2 stream directly as its cached gRPC frame (envelope + bytes, built once per
    // event for all subscribers), a batch of ready events in one write. Connect still owns
    // the call: it authenticated it, and it ends it (trailers, error status, deadline and
    // cancellation through ctx.signal) once this generator returns or throws. This relies
    // on connect (2.x) writing a message before it asks for the next one, so the direct
    // writes follow the headers and the first message; the fast-path tests would fail
    // otherwise (internal/server/stream-fast-path.test.ts).
    const gzip = ctx.responseHeader.get("grpc-encoding") === "gzip";
    let headersSent = false;
    for await (const batch of counted(deps.log.followBatches(req.runId, after, signal))) {
      let from = 0;
      if (!headersSent) {
        const first = batch[0] as LoggedEvent;
        yield toResponse(first);
        headersSent = true;
        if (TERMINAL_TYPES.has(first.type)) return true;
        from = 1;
      }
      // A batch goes out in as few writes as the stream's buffer allows: a slow client
      // holds at most about one buffer's worth here (the log's follower bounds the rest).
      while (from < batch.length) {
        if (ctx.signal.aborted) throw stoppedBy(ctx.signal);
        if (stream.destroyed) return true;
        const next = writeFrames(stream, batch, from, gzip);
        if (next < 0) return true; // wrote the terminal event
        from = next;
        if (stream.writableNeedDrain) await drained(stream, ctx.signal);
      }
    }
    return false;
  }
}

/**
 * Why a live stream stopped before its run's terminal event: the call's signal fired (the
 * deadline, the client went away, the server is shutting down). Ending the generator
 * normally would end the call with status OK, which a client could take for the end of
 * the run's events; this carries connect's reason (DEADLINE_EXCEEDED for a deadline).
 */
function stoppedBy(signal: AbortSignal): ConnectError {
  if (!signal.aborted) return new ConnectError("the run's event stream stopped", Code.Unavailable);
  return ConnectError.from(signal.reason, Code.Canceled);
}

/**
 * Writes the gRPC frames of `batch` from `from` on as one write (corked), until the
 * stream's buffer is full. Returns the index of the first event not written, or -1 when
 * it wrote a terminal event (nothing may follow it).
 */
function writeFrames(
  stream: Http2Stream,
  batch: readonly LoggedEvent[],
  from: number,
  gzip: boolean,
): number {
  let i = from;
  stream.cork();
  try {
    while (i < batch.length) {
      const ev = batch[i++] as LoggedEvent;
      const frame = ev.grpcFrame;
      const room = stream.write(
        gzip && frame.length - 5 >= COMPRESS_MIN_BYTES ? ev.grpcFrameGzip : frame,
      );
      if (TERMINAL_TYPES.has(ev.type)) return -1;
      if (!room) break;
    }
  } finally {
    stream.uncork();
  }
  return i;
}

/** Resolves when the stream can take more, closes, or the call is aborted. */
function drained(stream: Http2Stream, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      stream.off("drain", done);
      stream.off("close", done);
      signal.removeEventListener("abort", done);
      resolve();
    };
    stream.on("drain", done);
    stream.on("close", done);
    signal.addEventListener("abort", done);
  });
}
