/** Backoff with full jitter and the per-cause log limiter: pure, with fake clocks. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createBackoff } from "./backoff.ts";
import { createLogLimiter } from "./log-limiter.ts";

describe("backoff", () => {
  it("grows exponentially to its cap, jittered below the ceiling, and resets", () => {
    const b = createBackoff({ baseMs: 100, capMs: 5000, random: () => 1 });
    assert.deepEqual(
      Array.from({ length: 8 }, () => b.next()),
      [100, 200, 400, 800, 1600, 3200, 5000, 5000],
    );
    assert.equal(b.failures, 8);
    b.reset();
    assert.equal(b.next(), 100);
    const jittered = createBackoff({ baseMs: 100, capMs: 5000 });
    for (let i = 0; i < 200; i++) {
      const w = jittered.next();
      assert.ok(w >= 0 && w <= 5000, `wait ${w}`);
    }
    assert.equal(createBackoff({ baseMs: 100, capMs: 5000, random: () => 0 }).next(), 0);
  });
});

describe("log limiter", () => {
  it("logs the first line of a cause, counts the repeats, and says how many it left out", () => {
    const lines: { obj: Record<string, unknown>; msg: string }[] = [];
    const logger = {
      warn: (obj: Record<string, unknown>, msg: string) => lines.push({ obj, msg }),
      error: (obj: Record<string, unknown>, msg: string) => lines.push({ obj, msg }),
    };
    let t = 0;
    const l = createLogLimiter({ logger: logger as never, intervalMs: 1000, now: () => t });
    for (let i = 0; i < 65; i++) l.warn("claim:EUNAVAILABLE", {}, "claiming failed");
    l.error("release:EUNAVAILABLE", {}, "release failed");
    assert.equal(lines.length, 2, "one line per cause within the interval");
    t = 1500;
    l.warn("claim:EUNAVAILABLE", {}, "claiming failed");
    assert.equal(lines.length, 3);
    assert.equal(lines[2]?.obj.suppressed, 64);
    assert.equal(lines[2]?.obj.cause, "claim:EUNAVAILABLE");
  });

  it("forgets the oldest causes past its bound", () => {
    const lines: string[] = [];
    const logger = { warn: (_o: unknown, m: string) => lines.push(m), error: () => undefined };
    const l = createLogLimiter({
      logger: logger as never,
      intervalMs: 1000,
      maxCauses: 2,
      now: () => 0,
    });
    l.warn("a", {}, "a");
    l.warn("b", {}, "b");
    l.warn("c", {}, "c"); // "a" is forgotten
    l.warn("a", {}, "a again");
    assert.deepEqual(lines, ["a", "b", "c", "a again"]);
  });
});
