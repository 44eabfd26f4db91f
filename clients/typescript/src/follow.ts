/**
 * Following a run's events: StreamEvents from a seq, resumed after a dropped connection
 * from the last seq seen (each event exactly once), until the run's terminal event (the
 * server ends the stream), the end of the history (`historyOnly`), or the caller stops.
 *
 * Resync: the stored log may lose events already delivered (the server's Redis lost
 * acknowledged writes). The server then ends the stream with DATA_LOSS; a resume whose
 * last seq is past the stored head gets OUT_OF_RANGE; an event that does not link to the
 * last delivered one (its prevHash is not that event's hash) shows a store that holds other
 * events past the loss. In each case the caller must drop every event it holds for the run
 * (they may not be in the store any more): with `onResync` the follow says so and starts
 * over from seq 0; without it, it throws ConnectError DATA_LOSS.
 */
import { setTimeout as delay } from "node:timers/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Event } from "./gen/agentd/v1/events_pb.js";
import { isTransient, type RunClient } from "./transport.ts";

/** Types after which a run never changes again (the server then ends the stream). */
export const TERMINAL_TYPES: ReadonlySet<string> = new Set([
  "run.completed",
  "run.failed",
  "run.cancelled",
]);

export interface FollowOptions {
  client: RunClient;
  runId: string;
  /** Events with seq greater than this. */
  afterSeq: bigint;
  historyOnly?: boolean;
  signal?: AbortSignal;
  /** Called for each event in order; "stop" ends the follow. */
  onEvent: (ev: Event) => Promise<"stop" | undefined> | "stop" | undefined;
  /** Told about each reconnect attempt after a dropped stream. */
  onReconnect?: (err: unknown, attempt: number) => void;
  /**
   * The stored log no longer holds every event delivered (see above): drop them all; the
   * follow goes on from seq 0. Without it, the follow throws ConnectError DATA_LOSS.
   */
  onResync?: (why: string) => void;
}

/** Reconnecting gives up after this long without an event. */
const RECONNECT_FOR_MS = 60_000;

export interface FollowResult {
  /** The last event delivered. */
  last: Event | undefined;
  /** The caller stopped (onEvent answered "stop"). */
  stopped: boolean;
}

export async function followEvents(o: FollowOptions): Promise<FollowResult> {
  let after = o.afterSeq;
  let last: Event | undefined;
  let attempt = 0;
  let lastProgress = Date.now();
  const budget = RECONNECT_FOR_MS;
  for (;;) {
    try {
      const stream = o.client.streamEvents(
        { runId: o.runId, afterSeq: after, historyOnly: o.historyOnly ?? false },
        o.signal === undefined ? {} : { signal: o.signal },
      );
      for await (const res of stream) {
        const ev = res.event;
        if (ev === undefined || ev.seq <= after) continue;
        if (last !== undefined && ev.seq === last.seq + 1n && ev.prevHash !== last.hash) {
          throw new ConnectError(
            `event ${ev.seq} does not follow the event ${last.seq} delivered before: the stored log lost events`,
            Code.DataLoss,
          );
        }
        after = ev.seq;
        last = ev;
        attempt = 0;
        lastProgress = Date.now();
        if ((await o.onEvent(ev)) === "stop") return { last, stopped: true };
      }
      return { last, stopped: false };
    } catch (err) {
      if (o.signal?.aborted) throw new ConnectError("interrupted", Code.Canceled);
      if (needsResync(err, last !== undefined)) {
        if (o.onResync === undefined) throw ConnectError.from(err, Code.DataLoss);
        o.onResync(ConnectError.from(err).rawMessage);
        after = 0n;
        last = undefined;
        lastProgress = Date.now();
        continue;
      }
      // A run that ended cannot produce more: a dropped stream after its terminal event is
      // as good as the end.
      if (last !== undefined && TERMINAL_TYPES.has(last.type)) return { last, stopped: false };
      if (!isTransient(err) || Date.now() - lastProgress > budget) throw err;
      attempt++;
      o.onReconnect?.(err, attempt);
      await delay(Math.min(200 * 2 ** (attempt - 1), 5000), undefined, { signal: o.signal }).catch(
        () => undefined,
      );
      if (o.signal?.aborted) throw new ConnectError("interrupted", Code.Canceled);
    }
  }
}

/**
 * True when the stored log lost events this follow delivered: DATA_LOSS, or OUT_OF_RANGE
 * on a resume (the last seq delivered is past the stored head).
 */
function needsResync(err: unknown, resumed: boolean): boolean {
  if (!(err instanceof ConnectError)) return false;
  return err.code === Code.DataLoss || (resumed && err.code === Code.OutOfRange);
}
