/**
 * A run's events as a hook: StreamEvents from the start, then live; after a broken stream
 * it opens again (with backoff) after the last seq it saw (`afterSeq`), so no event is
 * lost or shown twice. Ends when the server ends the stream of a finished run.
 *
 * Resync: a stream refused with DATA_LOSS (the stored log lost events this page was shown)
 * or OUT_OF_RANGE after events were shown (the page's last seq is past the stored head) means
 * the page holds events the store no longer has: `onResync` drops them and the run is read
 * again from the start (docs/api.md, "Resync").
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { useContext, useEffect, useState } from "preact/hooks";
import type { Event } from "../../gen/agentd/v1/events_pb.js";
import { type Api, errorText } from "./api.ts";
import { FIRST_DELAY_MS, nextDelay, OPEN_AFTER_MS, sleep } from "./backoff.ts";
import { refused, SessionContext } from "./session.ts";

export type StreamStatus = "connecting" | "live" | "reconnecting" | "ended" | "error";

export function useRunEvents(
  api: Api,
  runId: string,
  onEvents: (events: Event[]) => void,
  onResync?: () => void,
): { status: StreamStatus; error: string } {
  const [status, setStatus] = useState<StreamStatus>("connecting");
  const [error, setError] = useState("");
  const session = useContext(SessionContext);
  useEffect(() => {
    const ac = new AbortController();
    let opened: ReturnType<typeof setTimeout> | undefined;
    void (async () => {
      let afterSeq = 0n;
      let delay = FIRST_DELAY_MS;
      while (!ac.signal.aborted) {
        try {
          const stream = api.streamEvents(
            { runId, afterSeq },
            { signal: ac.signal, onHeader: () => setStatus("live") },
          );
          opened = setTimeout(() => {
            setStatus("live");
            delay = FIRST_DELAY_MS;
          }, OPEN_AFTER_MS);
          // Events that arrive together are handed over together (one render).
          let batch: Event[] = [];
          let flush: ReturnType<typeof setTimeout> | undefined;
          for await (const res of stream) {
            const e = res.event;
            if (e === undefined || e.seq <= afterSeq) continue;
            afterSeq = e.seq;
            delay = FIRST_DELAY_MS;
            batch.push(e);
            flush ??= setTimeout(() => {
              flush = undefined;
              const b = batch;
              batch = [];
              onEvents(b);
            }, 16);
          }
          clearTimeout(opened);
          if (flush !== undefined) clearTimeout(flush);
          if (batch.length > 0) onEvents(batch);
          setStatus("ended");
          setError("");
          return;
        } catch (err) {
          clearTimeout(opened);
          if (ac.signal.aborted) return;
          // A token refused now (revoked, roles changed): back to the token form, no retry.
          if (refused(err)) return session?.signOut(`Your token was refused: ${errorText(err)}`);
          if (
            err instanceof ConnectError &&
            (err.code === Code.DataLoss || (err.code === Code.OutOfRange && afterSeq > 0n))
          ) {
            // What this page shows is not all in the store any more: start over.
            afterSeq = 0n;
            onResync?.();
            setError(errorText(err));
            continue;
          }
          if (err instanceof ConnectError && err.code === Code.NotFound) {
            setStatus("error");
            setError(errorText(err));
            return;
          }
          setError(errorText(err));
        }
        setStatus("reconnecting");
        await sleep(delay, ac.signal);
        delay = nextDelay(delay);
      }
    })();
    return () => {
      clearTimeout(opened);
      ac.abort();
    };
  }, [api, runId, onEvents, onResync]);
  return { status, error };
}
