/**
 * A run's events for the console, without the page: StreamEvents from the start, then
 * live; after a broken stream it opens again (with backoff) after the last seq it handed
 * over (`afterSeq`), so no event is lost or shown twice. Ends when the server ends the
 * stream of a finished run, on NOT_FOUND, on a refused token, or when `signal` aborts.
 *
 * Resync: a stream refused with DATA_LOSS (the stored log lost events already handed over),
 * OUT_OF_RANGE after events were handed over (the last seq is past the stored head), or a
 * resumed stream whose next event's prevHash is not the hash of the last one handed over, or
 * that no longer holds that last one as it was (a resume asks for it again): the log was
 * rewound and written again between two connections. The
 * events handed over are not all in the store any more; `onResync` says so and the run is
 * read again from the start (docs/api.md, "Resync").
 *
 * Must never: hand over an event that does not chain onto the one before it.
 */
import { type Client, Code, ConnectError } from "@connectrpc/connect";
import type { Event } from "../../gen/agentd/v1/events_pb.js";
import type { RunService } from "../../gen/agentd/v1/run_service_pb.js";
import { FIRST_DELAY_MS, nextDelay, OPEN_AFTER_MS, sleep } from "./backoff.ts";

/** api.ts's client (not imported from there: that file needs a page). */
type Api = Client<typeof RunService>;

export type StreamStatus = "connecting" | "live" | "reconnecting" | "ended" | "error";

export interface FollowHandlers {
  onEvents: (events: Event[]) => void;
  onResync?: () => void;
  onStatus: (status: StreamStatus) => void;
  /** The last error ("" once the stream ended cleanly). */
  onError: (err: unknown) => void;
  /** The token itself was refused: nothing but a new token helps (no retry). */
  onRefused: (err: unknown) => void;
}

export async function followRun(
  api: Api,
  runId: string,
  h: FollowHandlers,
  signal: AbortSignal,
): Promise<void> {
  let afterSeq = 0n;
  let lastHash = "";
  let delay = FIRST_DELAY_MS;
  let opened: ReturnType<typeof setTimeout> | undefined;
  try {
    while (!signal.aborted) {
      try {
        // A resume asks again for the last event shown, to see that the store still
        // holds it (a log rewritten to exactly that seq sends nothing after it).
        let echo = afterSeq > 0n && lastHash !== "";
        const stream = api.streamEvents(
          { runId, afterSeq: echo ? afterSeq - 1n : afterSeq },
          { signal, onHeader: () => h.onStatus("live") },
        );
        opened = setTimeout(() => {
          h.onStatus("live");
          delay = FIRST_DELAY_MS;
        }, OPEN_AFTER_MS);
        // Events that arrive together are handed over together (one render).
        let batch: Event[] = [];
        let flush: ReturnType<typeof setTimeout> | undefined;
        try {
          for await (const res of stream) {
            const e = res.event;
            if (e === undefined) continue;
            if (echo) {
              echo = false;
              if (e.seq !== afterSeq || e.hash !== lastHash) throw lostEvents(afterSeq);
              continue;
            }
            if (e.seq <= afterSeq) continue;
            if (e.seq === afterSeq + 1n && lastHash !== "" && e.prevHash !== lastHash)
              throw lostEvents(afterSeq);
            afterSeq = e.seq;
            lastHash = e.hash;
            delay = FIRST_DELAY_MS;
            batch.push(e);
            flush ??= setTimeout(() => {
              flush = undefined;
              const b = batch;
              batch = [];
              h.onEvents(b);
            }, 16);
          }
          // Ended without the event asked again: the store no longer holds it.
          if (echo) throw lostEvents(afterSeq);
        } finally {
          // What was handed over stays handed over, even when the stream then broke.
          if (flush !== undefined) clearTimeout(flush);
          if (batch.length > 0) h.onEvents(batch);
        }
        clearTimeout(opened);
        h.onStatus("ended");
        h.onError("");
        return;
      } catch (err) {
        clearTimeout(opened);
        if (signal.aborted) return;
        if (isRefused(err)) return h.onRefused(err);
        if (needsResync(err, afterSeq)) {
          afterSeq = 0n;
          lastHash = "";
          h.onResync?.();
          h.onError(err);
          continue;
        }
        if (err instanceof ConnectError && err.code === Code.NotFound) {
          h.onStatus("error");
          h.onError(err);
          return;
        }
        h.onError(err);
      }
      h.onStatus("reconnecting");
      await sleep(delay, signal);
      delay = nextDelay(delay);
    }
  } finally {
    clearTimeout(opened);
  }
}

function lostEvents(afterSeq: bigint): ConnectError {
  return new ConnectError(
    `the stored log no longer holds event ${afterSeq} as shown before: it lost events`,
    Code.DataLoss,
  );
}

/** The store lost events already handed over. */
function needsResync(err: unknown, afterSeq: bigint): boolean {
  return (
    err instanceof ConnectError &&
    (err.code === Code.DataLoss || (err.code === Code.OutOfRange && afterSeq > 0n))
  );
}

function isRefused(err: unknown): boolean {
  return (
    err instanceof ConnectError &&
    (err.code === Code.Unauthenticated || err.code === Code.PermissionDenied)
  );
}
