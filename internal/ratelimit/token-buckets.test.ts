/** Token buckets under hostile conditions: a clock going backwards, many tokens, reloads. */
import assert from "node:assert/strict";
import { it } from "node:test";
import { createTokenBuckets } from "./token-buckets.ts";

const RATE = { perSecond: 2, burst: 2 };

it("a burst, then refusals that say when; refilled at the rate", () => {
  let t = 1000;
  const b = createTokenBuckets({ now: () => t });
  assert.deepEqual(b.take("a", RATE), { ok: true });
  assert.deepEqual(b.take("a", RATE), { ok: true });
  assert.deepEqual(b.take("a", RATE), { ok: false, retryAfterMs: 500 });
  t += 250;
  assert.deepEqual(b.take("a", RATE), { ok: false, retryAfterMs: 250 });
  t += 250;
  assert.deepEqual(b.take("a", RATE), { ok: true });
  assert.deepEqual(b.take("b", RATE), { ok: true }, "another id has its own bucket");
});

it("a clock that goes backwards refills nothing (and takes nothing back) until it passes where it was", () => {
  let t = 10_000;
  const b = createTokenBuckets({ now: () => t });
  b.take("a", RATE);
  b.take("a", RATE);
  t = 0; // backwards by 10 s
  const r = b.take("a", RATE);
  assert.equal(r.ok, false);
  assert.equal((r as { retryAfterMs: number }).retryAfterMs, 500, "no negative refill");
  t = 10_500;
  assert.deepEqual(b.take("a", RATE), { ok: true });
  t = 1e15; // far ahead: still at most a burst
  assert.deepEqual(b.take("a", RATE), { ok: true });
  assert.deepEqual(b.take("a", RATE), { ok: true });
  assert.equal(b.take("a", RATE).ok, false);
});

it("memory is bounded however many tokens: full buckets go first, then the least recently used", () => {
  let t = 0;
  const b = createTokenBuckets({ now: () => t, maxBuckets: 1000 });
  b.take("busy", RATE);
  b.take("busy", RATE);
  for (let i = 0; i < 100_000; i++) b.take(`tok-${i}`, RATE);
  assert.equal(b.size(), 1000);
  t += 10_000; // every bucket full again: any may go
  for (let i = 0; i < 5000; i++) b.take(`late-${i}`, RATE);
  assert.equal(b.size(), 1000);
});

it("with no full bucket to drop, the least recently used goes", () => {
  const t = 0;
  const b = createTokenBuckets({ now: () => t, maxBuckets: 3 });
  b.take("x", { perSecond: 1, burst: 1 }); // empty now
  b.take("y", { perSecond: 1, burst: 100 }); // 99 left: not full
  b.take("z", { perSecond: 1, burst: 100 });
  b.take("y", { perSecond: 1, burst: 100 }); // y used again: z is older
  b.take("w", { perSecond: 1, burst: 100 }); // none full: evicts the least recently used, x
  assert.equal(b.size(), 3);
  assert.equal(b.take("x", { perSecond: 1, burst: 1 }).ok, true, "x was dropped: a fresh bucket");
});

it("retain() drops the buckets of removed tokens; a changed rate applies at once", () => {
  const t = 0;
  const b = createTokenBuckets({ now: () => t });
  b.take("keep", RATE);
  b.take("gone", RATE);
  assert.equal(
    b.retain((id) => id === "keep"),
    1,
  );
  assert.equal(b.size(), 1);
  // Rate lowered to a burst of 1: what is left (1) is capped by it.
  assert.equal(b.take("keep", { perSecond: 1, burst: 1 }).ok, true);
  assert.equal(b.take("keep", { perSecond: 1, burst: 1 }).ok, false);
});
