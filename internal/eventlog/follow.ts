/**
 * follow(): history first, then live events, each exactly once and in order, for any
 * adapter that offers a live feed. The feed may deliver duplicates, skip events when a
 * subscriber lags, or start late: gaps are filled from the log, duplicates dropped by seq.
 *
 * A rewound log ends the follow with EREWOUND (LogRewoundError), never with events of
 * another chain: each batch must link to the last delivered event (its first `prevHash` is
 * that event's `hash`), and when the feed reports that the store's head went behind, the
 * last delivered event is read back. A client told EREWOUND drops what it holds past the
 * stored head and reads the run again (docs/api.md, "Resync").
 */
import { hashOf, prevHashOf } from "./chain-links.ts";
import type { LoggedEvent } from "./event-codec.ts";
import { LogRewoundError } from "./log-rewound-error.ts";

/** A source of live events of a run. */
export interface LiveFeed {
  /**
   * Starts delivering the run's new events to `onEvent`. Once the promise resolves, every
   * event appended later is delivered (possibly with ones appended earlier).
   * `onRewound` (optional) is told when the store's last event went behind one the feed
   * already delivered (storage lost events): `last` is the store's last event now, if any.
   * Returns the function that stops delivery.
   */
  subscribe(
    runId: string,
    onEvent: (ev: LoggedEvent) => void,
    onRewound?: (last: LoggedEvent | undefined) => void,
  ): Promise<() => void>;
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
  /** The store reported a head behind what the feed delivered: check ours at the next turn. */
  let rewound = false;
  const unsubscribe = await feed.subscribe(
    runId,
    (ev) => {
      if (queue.length >= MAX_BUFFERED) {
        // A slow consumer: drop the buffer and let it read the log instead of growing memory.
        overflowed = true;
        queue = [];
      } else {
        queue.push(ev);
      }
      wake?.();
    },
    () => {
      rewound = true;
      wake?.();
    },
  );
  const onAbort = (): void => wake?.();
  signal.addEventListener("abort", onAbort);
  try {
    let last = afterSeq;
    /** hash of the last delivered event ("" until one was). */
    let lastHash = "";
    const linked = (batch: LoggedEvent[]): LoggedEvent[] => {
      const first = batch[0];
      if (first !== undefined && lastHash !== "" && prevHashOf(first.json) !== lastHash) {
        throw new LogRewoundError(
          runId,
          { seq: last, hash: lastHash },
          { seq: first.seq - 1, hash: prevHashOf(first.json) ?? "" },
        );
      }
      const end = batch[batch.length - 1];
      if (end !== undefined) lastHash = hashOf(end.json) ?? "";
      return batch;
    };
    let catchUp = true;
    while (!signal.aborted) {
      if (rewound) {
        rewound = false;
        await checkStillStored(read, runId, last, lastHash);
      }
      if (catchUp || overflowed) {
        catchUp = false;
        overflowed = false;
        for (;;) {
          const page = await read(runId, last, PAGE);
          if (signal.aborted) return;
          const end = page[page.length - 1];
          if (end !== undefined) {
            yield linked(page);
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
      if (batch.length > 0) yield linked(batch);
    }
  } finally {
    signal.removeEventListener("abort", onAbort);
    unsubscribe();
  }
}

/**
 * After the feed reported a rewound store: the last delivered event (`last`, `lastHash`)
 * must still be stored as it was delivered, else the follow ends with EREWOUND.
 */
async function checkStillStored(
  read: ReadFn,
  runId: string,
  last: number,
  lastHash: string,
): Promise<void> {
  if (last === 0) return;
  const [ev] = await read(runId, last - 1, 1);
  if (ev !== undefined && ev.seq === last && (lastHash === "" || hashOf(ev.json) === lastHash))
    return;
  // The store's head: the other event at `last`, or the newest one before it.
  const stored =
    ev?.seq === last ? ev : (await read(runId, Math.max(0, last - 1 - PAGE), PAGE)).at(-1);
  throw new LogRewoundError(
    runId,
    { seq: last, hash: lastHash },
    { seq: stored?.seq ?? 0, hash: stored === undefined ? "" : (hashOf(stored.json) ?? "") },
  );
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
