/** createFairSlots: permits go round-robin across the tenants waiting, not first come first served. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createFairSlots } from "./fair-slots.ts";

const tick = () => new Promise<void>((r) => setImmediate(r));

describe("createFairSlots", () => {
  it("a tenant with many waiters does not go ahead of another tenant's one", async () => {
    const slots = createFairSlots(1);
    const order: string[] = [];
    const first = await slots.acquire("a");
    // Each waiter works on its chunk for a moment once it has the permit, then gives it back.
    const wait = (tenant: string, label: string) =>
      slots.acquire(tenant).then((release) => {
        order.push(label);
        return tick().then(release);
      });
    // a queues three chunks, then b two: b's come in turn with a's, not after them.
    const waiting = [
      wait("a", "a1"),
      wait("a", "a2"),
      wait("a", "a3"),
      wait("b", "b1"),
      wait("b", "b2"),
    ];
    assert.equal(slots.waiting, 5);
    first();
    await Promise.all(waiting);
    assert.deepEqual(order, ["b1", "a1", "b2", "a2", "a3"]);
    assert.equal(slots.active, 0);
    assert.equal(slots.waiting, 0);
  });

  it("never more permits than built with; a release counts once; an aborted wait leaves the queue", async () => {
    assert.throws(() => createFairSlots(0), /positive integer/);
    const slots = createFairSlots(2);
    const r1 = await slots.acquire("a");
    const r2 = await slots.acquire("a");
    assert.equal(slots.active, 2);
    const ac = new AbortController();
    const aborted = slots.acquire("b", ac.signal);
    const later = slots.acquire("c");
    ac.abort(new Error("deadline"));
    await assert.rejects(aborted, /deadline/);
    assert.equal(slots.waiting, 1);
    r1();
    r1(); // a second release is a no-op
    const r3 = await later;
    assert.equal(slots.active, 2, "the permit passed to c; the double release freed nothing");
    r2();
    r3();
    assert.equal(slots.active, 0);
    await assert.rejects(slots.acquire("d", AbortSignal.abort(new Error("gone"))), /gone/);
  });
});
