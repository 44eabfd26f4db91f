import assert from "node:assert/strict";
import { it } from "node:test";
import { onScrape, REFRESH_MIN_INTERVAL_MS, SCRAPE_DEADLINE_MS, scrape } from "./scrape.ts";

it("a flood of scrapes shares one refresh; a hanging refresher is cut at the deadline", async () => {
  let calls = 0;
  const off = onScrape(async () => {
    calls++;
    await new Promise((r) => setTimeout(r, 50));
  });
  const hang = onScrape(() => new Promise<void>(() => undefined));
  try {
    const t0 = Date.now();
    // The hanging refresher never settles: that these resolve at all is the deadline firing.
    const all = await Promise.all(Array.from({ length: 50 }, () => scrape()));
    const took = Date.now() - t0;
    assert.equal(calls, 1, "fifty concurrent scrapes, one refresh");
    // A lower bound only (load can only lengthen it): the scrape waited for the deadline
    // instead of answering before its refreshers had their chance.
    assert.ok(took >= SCRAPE_DEADLINE_MS - 50, `answered after ${took} ms, before the deadline`);
    assert.ok(
      all.every((s) => s.body.includes("agentd_build_info")),
      "every scrape has values",
    );
    await scrape();
    assert.equal(calls, 1, "a scrape right after shares the last refresh");
    await new Promise((r) => setTimeout(r, REFRESH_MIN_INTERVAL_MS + 50));
    hang();
    await scrape();
    assert.equal(calls, 2, "a later scrape refreshes again");
  } finally {
    off();
    hang();
  }
});
