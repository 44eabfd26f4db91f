/**
 * scrape(): a flood of scrapes shares one refresh, a hanging refresher is cut at the
 * deadline, and a scrape within the minimum interval reuses the last refresh. On mocked
 * timers and clock: what the test checks is what happens at each moment, so a loaded
 * machine cannot move a scrape across the interval or the deadline.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { onScrape, REFRESH_MIN_INTERVAL_MS, SCRAPE_DEADLINE_MS, scrape } from "./scrape.ts";

/** Lets every pending promise job run (setImmediate is not mocked). */
const settle = async (): Promise<void> => {
  for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
};

it("a flood of scrapes shares one refresh; a hanging refresher is cut at the deadline", async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout", "Date"], now: 1_000_000_000 });
  let calls = 0;
  const off = onScrape(async () => {
    calls++;
  });
  const hang = onScrape(() => new Promise<void>(() => undefined));
  try {
    let answered = 0;
    const flood = Promise.all(Array.from({ length: 50 }, () => scrape().finally(() => answered++)));
    await settle();
    assert.equal(calls, 1, "fifty concurrent scrapes, one refresh");
    // The hanging refresher never settles: nothing answers until its deadline fires.
    t.mock.timers.tick(SCRAPE_DEADLINE_MS - 1);
    await settle();
    assert.equal(answered, 0, "no scrape answered before the deadline");
    t.mock.timers.tick(1);
    const all = await flood;
    assert.ok(
      all.every((s) => s.body.includes("agentd_build_info")),
      "every scrape has values",
    );
    t.mock.timers.tick(REFRESH_MIN_INTERVAL_MS - 1);
    await scrape();
    assert.equal(calls, 1, "a scrape within the interval shares the last refresh");
    t.mock.timers.tick(1);
    hang();
    await scrape();
    assert.equal(calls, 2, "a scrape past the interval refreshes again");
  } finally {
    off();
    hang();
  }
});
