/**
 * followLog / followLogBatches against a scripted live feed: duplicates dropped, gaps filled
 * from the log, a feed that overflows a slow consumer falls back to reading the log.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { LoggedEvent } from "./event-codec.ts";
import { followLog, followLogBatches, type LiveFeed } from "./follow.ts";

const RUN = "01J0000000000000000000RUN1";

/** A log of `n` events (the JSON is never decoded here) and a feed the test drives. */
function fixture(n: number) {
  const events = Array.from(
    { length: n },
    (_, i) => new LoggedEvent(RUN, i + 1, `{"seq":"${i + 1}"}`),
  );
  let stored = 0;
  const reads: number[] = [];
  const read = async (_runId: string, after: number, limit = Infinity) => {
    reads.push(after);
    return events.slice(after, Math.min(stored, after + limit));
  };
  let push: (ev: LoggedEvent) => void = () => undefined;
  const feed: LiveFeed = {
    subscribe: async (_runId, onEvent) => {
      push = onEvent;
      return () => {
        push = () => undefined;
      };
    },
  };
  return {
    read,
    feed,
    reads,
    /** Stores events up to `seq`. */
    store: (seq: number) => {
      stored = seq;
    },
    /** The feed delivers these seqs (which must be stored). */
    deliver: (...seqs: number[]) => {
      for (const s of seqs) push(events[s - 1] as LoggedEvent);
    },
  };
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

it("drops duplicates, fills a gap from the log, keeps order; batches are consecutive", async () => {
  const f = fixture(20);
  f.store(3);
  const ac = new AbortController();
  const batches: number[][] = [];
  const done = (async () => {
    for await (const b of followLogBatches(f.read, f.feed, RUN, 1, ac.signal)) {
      batches.push(b.map((e) => e.seq));
      if (b.at(-1)?.seq === 12) ac.abort();
    }
  })();
  await tick();
  f.store(6);
  f.deliver(3, 4, 5, 6); // 3 was history already: dropped
  await tick();
  f.store(12);
  f.deliver(6, 9, 10); // 7, 8 missing: read from the log
  await tick();
  f.deliver(11, 12);
  await done;
  assert.deepEqual(batches.flat(), [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
  for (const b of batches) {
    for (let i = 1; i < b.length; i++) assert.equal(b[i], (b[i - 1] as number) + 1);
  }
});

it("followLog yields the same events one at a time and stops on abort", async () => {
  const f = fixture(10);
  f.store(4);
  const ac = new AbortController();
  const seen: number[] = [];
  const done = (async () => {
    for await (const ev of followLog(f.read, f.feed, RUN, 0, ac.signal)) seen.push(ev.seq);
  })();
  await tick();
  f.store(6);
  f.deliver(5, 6);
  await tick();
  ac.abort();
  await done;
  assert.deepEqual(seen, [1, 2, 3, 4, 5, 6]);
});
