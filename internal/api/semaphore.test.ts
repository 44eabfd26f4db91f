/** The unpack semaphore: permits, order, waiters that give up, releases counted once. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createSemaphore } from "./semaphore.ts";

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

describe("createSemaphore", () => {
  it("hands out at most `permits` at once, to waiters in arrival order", async () => {
    const s = createSemaphore(2);
    const a = await s.acquire();
    const b = await s.acquire();
    const order: string[] = [];
    const track = (name: string) => (release: () => void) => {
      order.push(name);
      return release;
    };
    const c = s.acquire().then(track("c"));
    const d = s.acquire().then(track("d"));
    await tick();
    assert.deepEqual([s.active, s.waiting, order.length], [2, 2, 0]);
    a();
    await tick();
    assert.deepEqual(order, ["c"]);
    b();
    await tick();
    assert.deepEqual(order, ["c", "d"]);
    assert.deepEqual([s.active, s.waiting], [2, 0]);
    (await c)();
    (await d)();
    assert.equal(s.active, 0);
  });

  it("a waiter whose signal aborts leaves the queue with the signal's reason", async () => {
    const s = createSemaphore(1);
    const held = await s.acquire();
    const ac = new AbortController();
    const gaveUp = s.acquire(ac.signal);
    const next = s.acquire();
    ac.abort(new Error("deadline"));
    await assert.rejects(gaveUp, /deadline/);
    assert.equal(s.waiting, 1);
    held();
    // The permit goes to the waiter behind, never to the one that gave up.
    (await next)();
    assert.equal(s.active, 0);
  });

  it("an already aborted signal is refused at once; a release counts only once", async () => {
    const s = createSemaphore(1);
    await assert.rejects(s.acquire(AbortSignal.abort(new Error("gone"))), /gone/);
    const r = await s.acquire();
    r();
    r();
    assert.equal(s.active, 0);
    const again = await s.acquire();
    assert.equal(s.active, 1);
    again();
  });

  it("refuses nonsense permits", () => {
    assert.throws(() => createSemaphore(0), RangeError);
    assert.throws(() => createSemaphore(1.5), RangeError);
  });
});
