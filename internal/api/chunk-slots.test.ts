/** slotPerChunk: a slot is held while a chunk is worked on, never while the source is waited for. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { slotPerChunk } from "./chunk-slots.ts";
import { createSemaphore } from "./semaphore.ts";

/** A source whose chunks come when the test says so. */
function gated(): { source: AsyncIterable<number>; send(n: number): void; end(): void } {
  const queue: (IteratorResult<number> | undefined)[] = [];
  let wake: (() => void) | undefined;
  const push = (r: IteratorResult<number>): void => {
    queue.push(r);
    wake?.();
  };
  return {
    source: {
      async *[Symbol.asyncIterator]() {
        for (;;) {
          while (queue.length === 0) await new Promise<void>((r) => (wake = r));
          const r = queue.shift() as IteratorResult<number>;
          if (r.done === true) return;
          yield r.value;
        }
      },
    },
    send: (n) => push({ done: false, value: n }),
    end: () => push({ done: true, value: undefined }),
  };
}

describe("slotPerChunk", () => {
  it("holds a slot while a chunk is worked on and none while the source is idle", async () => {
    const slots = createSemaphore(1);
    const src = gated();
    const it = slotPerChunk(src.source, slots)[Symbol.asyncIterator]();
    const first = it.next();
    assert.equal(slots.active, 0, "no slot before any chunk came");
    src.send(1);
    assert.deepEqual(await first, { done: false, value: 1 });
    assert.equal(slots.active, 1, "the chunk is worked on with the slot held");
    const second = it.next(); // asks the (idle) source for more
    await new Promise((r) => setImmediate(r));
    assert.equal(slots.active, 0, "waiting for the source holds no slot");
    // Another user takes the slot meanwhile; the next chunk waits for it.
    const other = await slots.acquire();
    src.send(2);
    await new Promise((r) => setImmediate(r));
    assert.equal(slots.waiting, 1, "the chunk waits for a slot");
    other();
    assert.deepEqual(await second, { done: false, value: 2 });
    src.end();
    assert.equal((await it.next()).done, true);
    assert.equal(slots.active, 0, "given back at the end");
  });

  it("gives the slot back when the consumer stops early or the wait is aborted", async () => {
    const slots = createSemaphore(1);
    const gen = slotPerChunk([1, 2, 3], slots);
    for await (const n of gen) if (n === 2) break;
    assert.equal(slots.active, 0);
    const held = await slots.acquire();
    const ac = new AbortController();
    const waiting = slotPerChunk([1], slots, ac.signal).next();
    await new Promise((r) => setImmediate(r));
    ac.abort(new Error("deadline"));
    await assert.rejects(waiting, /deadline/);
    held();
    assert.equal(slots.active, 0);
    assert.equal(slots.waiting, 0);
  });
});
