/**
 * The default retry schedule of a sink rides out a 5-minute receiver outage: computed from
 * the parsed default config (a property of the schedule, not a measured duration), and
 * each wait stays within [half its ceiling, its ceiling].
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { parseExportConfig } from "./config.ts";
import { createRetrySchedule, retrySpan } from "./retry-schedule.ts";

const FIVE_MINUTES = 5 * 60_000;

function defaultSink() {
  const r = parseExportConfig(
    ["sinks:", "  - {name: hook, type: webhook, url: 'https://h.example/x', secret: $ENV.K}"].join(
      "\n",
    ),
    "export.yaml",
    { K: "0123456789abcdef-key" },
  );
  assert.ok(r.ok, JSON.stringify(r));
  return r.sinks[0] as NonNullable<(typeof r.sinks)[0]>;
}

it("the default retries of one event last at least 6 minutes (a 5-minute outage loses nothing)", () => {
  const s = defaultSink();
  const span = retrySpan(s);
  assert.ok(span.minMs >= FIVE_MINUTES + 60_000, `the retries may end after ${span.minMs} ms`);
  // And not unboundedly long: one failing event holds the sink's queue behind it.
  assert.ok(span.maxMs <= 15 * 60_000, `the retries may last ${span.maxMs} ms`);
  assert.deepEqual(span, { minMs: 391_750, maxMs: 783_500 });
});

it("the old defaults (8 attempts) did not: their span's floor is under a minute", () => {
  const span = retrySpan({ maxAttempts: 8, backoff: { initialMs: 500, maxMs: 60_000 } });
  assert.ok(span.minMs < 60_000);
});

it("each wait is in [ceiling/2, ceiling], the ceiling doubling up to maxMs", () => {
  const b = { initialMs: 500, maxMs: 60_000 };
  const low = createRetrySchedule(b, () => 0);
  const high = createRetrySchedule(b, () => 1);
  const lows = Array.from({ length: 10 }, () => low.next());
  const highs = Array.from({ length: 10 }, () => high.next());
  assert.deepEqual(lows, [250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  assert.deepEqual(highs, [500, 1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000]);
  // The span is the sum of these waits.
  const span = retrySpan({ maxAttempts: 11, backoff: b });
  assert.equal(
    span.minMs,
    lows.reduce((a, x) => a + x, 0),
  );
  assert.equal(
    span.maxMs,
    highs.reduce((a, x) => a + x, 0),
  );
});

it("one attempt: no retries, no span", () => {
  assert.deepEqual(retrySpan({ maxAttempts: 1, backoff: { initialMs: 500, maxMs: 60_000 } }), {
    minMs: 0,
    maxMs: 0,
  });
});
