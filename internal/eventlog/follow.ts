/**
 * follow(): history first, then live events, each exactly once and in order, for any
 * adapter that offers a live feed. The feed may deliver duplicates, skip events when a
 * subscriber lags, or start late: gaps are filled from the log, duplicates dropped by seq.
 */
import type { LoggedEvent } from "./event-codec.ts";

/** A source of live events of a run. */
export interface LiveFeed {
  /**
   * Starts delivering the run's new events to `onEvent`. Once the promise resolves, every
   * event appended later is delivered (possibly with ones appended earlier).
   * Returns the function that stops delivery.
   */
  subscribe(runId: string, onEvent: (ev: LoggedEvent) => void): Promise<() => void>;
}

type ReadFn = (runId: string, afterSeq: number, limit?: number) => Promise<LoggedEvent[]>;

/** Live events buffered per subscriber before it falls back to reading the log. */
const MAX_BUFFERED = 10_000;
const PAGE = 1000;

export async function* followLog(
  read: ReadFn,
  feed: LiveFeed,
  runId: string,
  afterSeq: number,
  signal: AbortSignal,
): AsyncGenerator<LoggedEvent> {
  if (signal.aborted) return;
  const queue: LoggedEvent[] = [];
  let overflowed = false;
  let wake: (() => void) | undefined;
  const unsubscribe = await feed.subscribe(runId, (ev) => {
    if (queue.length >= MAX_BUFFERED) {
      // A slow consumer: drop the buffer and let it read the log instead of growing memory.
      overflowed = true;
      queue.length = 0;
    } else {
      queue.push(ev);
    }
    wake?.();
  });
  const onAbort = (): void => wake?.();
  signal.addEventListener("abort", onAbort);
  try {
    let last = afterSeq;
    let catchUp = true;
    while (!signal.aborted) {
      if (catchUp || overflowed) {
        catchUp = false;
        overflowed = false;
        for (;;) {
          const page = await read(runId, last, PAGE);
          for (const ev of page) {
            if (signal.aborted) return;
            yield ev;
            last = ev.seq;
          }
          if (page.length < PAGE) break;
        }
        continue;
      }
      const ev = queue.shift();
      if (ev === undefined) {
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = undefined;
        continue;
      }
      if (ev.seq <= last) continue;
      if (ev.seq > last + 1) {
        queue.unshift(ev);
        catchUp = true;
        continue;
      }
      yield ev;
      last = ev.seq;
    }
  } finally {
    signal.removeEventListener("abort", onAbort);
    unsubscribe();
  }
}
