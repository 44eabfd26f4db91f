/**
 * The tenant's live feed (WatchEvents) as a hook: `onChange` runs (debounced 200 ms) after
 * events of the given types and once each time the stream (re)opens. A broken stream is
 * opened again after a backoff, resuming after the last cursor, so nothing is missed.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { useEffect, useRef, useState } from "preact/hooks";
import type { Api } from "./api.ts";
import { FIRST_DELAY_MS, nextDelay, OPEN_AFTER_MS, sleep } from "./backoff.ts";
import { debounce } from "./debounce.ts";

export type FeedStatus = "connecting" | "live" | "reconnecting";

export function useFeed(api: Api, types: readonly string[], onChange: () => void): FeedStatus {
  const [status, setStatus] = useState<FeedStatus>("connecting");
  const changed = useRef(onChange);
  changed.current = onChange;
  const key = types.join(",");
  useEffect(() => {
    const ac = new AbortController();
    const fire = debounce(() => changed.current(), 200);
    let opened: ReturnType<typeof setTimeout> | undefined;
    void (async () => {
      let cursor = "";
      let delay = FIRST_DELAY_MS;
      let isOpen = false;
      const open = () => {
        clearTimeout(opened);
        if (isOpen) return;
        isOpen = true;
        delay = FIRST_DELAY_MS;
        setStatus("live");
        fire();
      };
      while (!ac.signal.aborted) {
        try {
          // Once the stream is open (headers, or no error for a moment), refresh: that
          // catches up on whatever happened while it was not (first load, after a break).
          opened = setTimeout(open, OPEN_AFTER_MS);
          const stream = api.watchEvents(
            { cursor, types: key.split(",") },
            {
              signal: ac.signal,
              onHeader: open,
            },
          );
          for await (const res of stream) {
            cursor = res.cursor;
            delay = FIRST_DELAY_MS;
            open();
            fire();
          }
        } catch (err) {
          if (ac.signal.aborted) return;
          clearTimeout(opened);
          // The cursor fell out of what the feed keeps: start afresh (open() refreshes).
          if (err instanceof ConnectError && err.code === Code.OutOfRange) cursor = "";
        }
        isOpen = false;
        setStatus("reconnecting");
        await sleep(delay, ac.signal);
        delay = nextDelay(delay);
      }
    })();
    return () => {
      fire.cancel();
      clearTimeout(opened);
      ac.abort();
    };
  }, [api, key]);
  return status;
}
