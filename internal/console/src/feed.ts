/**
 * The tenant's live feed (WatchEvents) as a hook: `onChange` runs (debounced 200 ms) after
 * events of the given types and once each time the stream (re)opens. A broken stream is
 * opened again after a backoff, resuming after the last cursor, so nothing is missed. A
 * refused token (UNAUTHENTICATED, PERMISSION_DENIED) ends it: back to the token form. A
 * stream counts as open once it stayed up for a moment or delivered an event, never on
 * its headers alone (a Connect stream refused answers 200 and its error after).
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { useContext, useEffect, useRef, useState } from "preact/hooks";
import type { Api } from "./api.ts";
import { FIRST_DELAY_MS, nextDelay, OPEN_AFTER_MS, sleep } from "./backoff.ts";
import { debounce } from "./debounce.ts";
import { refused, SessionContext } from "./session.ts";

export type FeedStatus = "connecting" | "live" | "reconnecting";

export function useFeed(api: Api, types: readonly string[], onChange: () => void): FeedStatus {
  const [status, setStatus] = useState<FeedStatus>("connecting");
  const session = useContext(SessionContext);
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
        setStatus("live");
        fire();
      };
      while (!ac.signal.aborted) {
        try {
          // Once the stream is open (headers, or no error for a moment), refresh: that
          // catches up on whatever happened while it was not (first load, after a break).
          opened = setTimeout(() => {
            delay = FIRST_DELAY_MS; // up for a moment without an error: healthy again
            open();
          }, OPEN_AFTER_MS);
          const stream = api.watchEvents({ cursor, types: key.split(",") }, { signal: ac.signal });
          for await (const res of stream) {
            cursor = res.cursor;
            delay = FIRST_DELAY_MS;
            open();
            fire();
          }
        } catch (err) {
          if (ac.signal.aborted) return;
          clearTimeout(opened);
          if (refused(err)) return session?.signOut(`Your token was refused: ${String(err)}`);
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
