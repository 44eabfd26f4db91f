/**
 * Following a run's events: StreamEvents from a seq, resumed after a dropped connection
 * from the last seq seen (each event exactly once), until the run's terminal event (the
 * server ends the stream), the end of the history (`historyOnly`), or the caller stops.
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
        after = ev.seq;
        last = ev;
        attempt = 0;
        lastProgress = Date.now();
        if ((await o.onEvent(ev)) === "stop") return { last, stopped: true };
      }
      return { last, stopped: false };
    } catch (err) {
      if (o.signal?.aborted) throw new ConnectError("interrupted", Code.Canceled);
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
