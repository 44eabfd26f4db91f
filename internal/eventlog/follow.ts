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

/**
 * The events after `afterSeq` in batches: each batch holds consecutive events (the first
 * is the one after the previous batch's last), every event exactly once, in order. A batch
 * is whatever was ready at once (a page of history, or the live events that arrived
 * since the consumer last asked), so a consumer can write it in one go.
 */
export async function* followLogBatches(
  read: ReadFn,
  feed: LiveFeed,
  runId: string,
  afterSeq: number,
  signal: AbortSignal,
): AsyncGenerator<LoggedEvent[]> {
  if (signal.aborted) return;
  let queue: LoggedEvent[] = [];
  let overflowed = false;
  let wake: (() => void) | undefined;
  const unsubscribe = await feed.subscribe(runId, (ev) => {
    if (queue.length >= MAX_BUFFERED) {
      // A slow consumer: drop the buffer and let it read the log instead of growing memory.
      overflowed = true;
      queue = [];
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
          if (signal.aborted) return;
          const end = page[page.length - 1];
          if (end !== undefined) {
            yield page;
            last = end.seq;
          }
          if (page.length < PAGE) break;
        }
        continue;
      }
      if (queue.length === 0) {
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = undefined;
        continue;
      }
      // Take everything queued; keep the run of consecutive events after `last`.
      const taken = queue;
      queue = [];
      const batch: LoggedEvent[] = [];
      for (let i = 0; i < taken.length; i++) {
        const ev = taken[i] as LoggedEvent;
        if (ev.seq <= last) continue; // already delivered (history, or a duplicate)
        if (ev.seq > last + 1) {
          // A gap (the feed started late or skipped): fill it from the log first.
          queue = taken.slice(i).concat(queue);
          catchUp = true;
          break;
        }
        batch.push(ev);
        last = ev.seq;
      }
      if (batch.length > 0) yield batch;
    }
  } finally {
    signal.removeEventListener("abort", onAbort);
    unsubscribe();
  }
}

/** followLogBatches one event at a time. */
export async function* followLog(
  read: ReadFn,
  feed: LiveFeed,
  runId: string,
  afterSeq: number,
  signal: AbortSignal,
): AsyncGenerator<LoggedEvent> {
  for await (const batch of followLogBatches(read, feed, runId, afterSeq, signal)) {
    for (const ev of batch) {
      if (signal.aborted) return;
      yield ev;
    }
  }
}
