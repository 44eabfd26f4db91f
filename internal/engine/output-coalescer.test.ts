/** The output.delta coalescer under a fake clock: rate, order, no loss, flush points. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type CoalescerClock, createOutputCoalescer } from "./output-coalescer.ts";

/** A manual clock: timers fire only when `advance` passes their due time. */
function fakeClock() {
  let now = 0;
  let nextId = 1;
  const timers = new Map<number, { at: number; fn: () => void }>();
  const clock: CoalescerClock = {
    now: () => now,
    setTimeout: (fn, ms) => {
      const id = nextId++;
      timers.set(id, { at: now + ms, fn });
      return id;
    },
    clearTimeout: (h) => {
      timers.delete(h as number);
    },
  };
  const advance = (ms: number) => {
    const end = now + ms;
    for (;;) {
      const due = [...timers.entries()]
        .filter(([, t]) => t.at <= end)
        .sort((a, b) => a[1].at - b[1].at || a[0] - b[0])[0];
      if (due === undefined) break;
      timers.delete(due[0]);
      now = Math.max(now, due[1].at);
      due[1].fn();
    }
    now = end;
  };
  return { clock, advance, pending: () => timers.size };
}

function setup(intervalMs = 50, maxChars?: number) {
  const f = fakeClock();
  const out: { at: number; text: string }[] = [];
  const c = createOutputCoalescer({
    emit: (text) => out.push({ at: f.clock.now(), text }),
    intervalMs,
    clock: f.clock,
    ...(maxChars === undefined ? {} : { maxChars }),
  });
  return { ...f, out, c };
}

describe("output coalescer", () => {
  test("a burst in one tick becomes one chunk on the next tick", () => {
    const { c, out, advance } = setup();
    c.push("Hel");
    c.push("lo");
    c.push(" there");
    assert.equal(out.length, 0);
    advance(0);
    assert.deepEqual(out, [{ at: 0, text: "Hello there" }]);
  });

  test("a steady stream is capped at one chunk per interval, without loss or reordering", () => {
    const { c, out, advance } = setup(50);
    const pushed: string[] = [];
    for (let i = 0; i < 400; i++) {
      const d = `t${i};`;
      pushed.push(d);
      c.push(d);
      advance(5); // 200 deltas a second for 2 s
    }
    c.close();
    assert.equal(out.map((o) => o.text).join(""), pushed.join(""));
    assert.ok(out.length <= 2000 / 50 + 2, `${out.length} chunks`);
    for (let i = 1; i < out.length - 1; i++) {
      const gap = (out[i]?.at ?? 0) - (out[i - 1]?.at ?? 0);
      assert.ok(gap >= 50, `gap ${gap} ms between chunks ${i - 1} and ${i}`);
    }
  });

  test("flush emits at once (before a tool call) and cancels the timer", () => {
    const { c, out, advance, pending } = setup();
    c.push("Let me read the file.");
    c.flush();
    assert.deepEqual(out, [{ at: 0, text: "Let me read the file." }]);
    assert.equal(pending(), 0);
    advance(1000);
    c.flush();
    assert.equal(out.length, 1, "no empty chunk");
  });

  test("text after a flush waits for the rest of the interval", () => {
    const { c, out, advance } = setup(50);
    c.push("a");
    c.flush();
    advance(10);
    c.push("b");
    advance(39);
    assert.equal(out.length, 1);
    advance(1);
    assert.deepEqual(out[1], { at: 50, text: "b" });
  });

  test("the size cap forces a chunk; deltas are never split", () => {
    const { c, out } = setup(50, 8);
    c.push("12345");
    c.push("6789😀"); // crosses the cap: emitted whole, surrogate pair intact
    assert.deepEqual(
      out.map((o) => o.text),
      ["123456789😀"],
    );
  });

  test("close flushes; empty pushes are ignored; push after close throws", () => {
    const { c, out, pending } = setup();
    c.push("");
    assert.equal(pending(), 0);
    c.push("end");
    c.close();
    assert.deepEqual(
      out.map((o) => o.text),
      ["end"],
    );
    assert.throws(() => c.push("late"), /after close/);
  });

  test("random deltas and flushes: the chunks concatenate to exactly the input", () => {
    let seed = 42;
    const rnd = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const { c, out, advance } = setup(50, 200);
    let all = "";
    for (let i = 0; i < 2000; i++) {
      const d = "xyzé€😀\n".slice(0, Math.floor(rnd() * 8)) + String(i);
      all += d;
      c.push(d);
      if (rnd() < 0.02) c.flush();
      advance(Math.floor(rnd() * 20));
    }
    c.close();
    assert.equal(out.map((o) => o.text).join(""), all);
    assert.ok(out.every((o) => o.text.length > 0));
  });

  test("with the real clock, text arrives within the interval", async () => {
    const got: string[] = [];
    const c = createOutputCoalescer({ emit: (t) => got.push(t), intervalMs: 20 });
    c.push("a");
    c.push("b");
    await new Promise((r) => setTimeout(r, 40));
    assert.deepEqual(got, ["ab"]);
    c.close();
  });
});
