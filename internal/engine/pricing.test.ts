/** Cost from the price table: integer micro-dollars, one rounding, unknown models at 0. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { isAgentdError } from "../errors.ts";
import { costMicros, DEFAULT_PRICE_TABLE, parsePriceTable, priceFor } from "./pricing.ts";

describe("pricing", () => {
  test("gpt-4o: $2.50 in, $10 out per million tokens", () => {
    assert.deepEqual(costMicros("gpt-4o", { inputTokens: 1_000_000, outputTokens: 1_000_000 }), {
      micros: 12_500_000,
      known: true,
    });
    // 1234 × 2.5 + 567 × 10 = 3085 + 5670 micros
    assert.deepEqual(costMicros("gpt-4o", { inputTokens: 1234, outputTokens: 567 }), {
      micros: 8755,
      known: true,
    });
  });

  test("rounds once, half up, on the sum (no per-part rounding drift)", () => {
    // gpt-4o-mini: 0.15 + 0.6 micros per token. 1 in + 1 out = 0.75 → 1.
    assert.equal(costMicros("gpt-4o-mini", { inputTokens: 1, outputTokens: 1 }).micros, 1);
    // 3 in = 0.45 → 0 ; 10 in = 1.5 → 2 (half up)
    assert.equal(costMicros("gpt-4o-mini", { inputTokens: 3, outputTokens: 0 }).micros, 0);
    assert.equal(costMicros("gpt-4o-mini", { inputTokens: 10, outputTokens: 0 }).micros, 2);
  });

  test("large counts stay exact (BigInt)", () => {
    const t = { "big-model": { inputPerMTok: 9_000_000_000, outputPerMTok: 1 } };
    const c = costMicros("big-model", { inputTokens: 1_000_000_007, outputTokens: 0 }, t);
    assert.equal(c.micros, 9_000_000_063_000);
  });

  test("an unknown model costs 0 and is marked unknown; snapshots match their model", () => {
    assert.deepEqual(costMicros("llama-3-70b", { inputTokens: 5000, outputTokens: 5000 }), {
      micros: 0,
      known: false,
    });
    assert.equal(priceFor("gpt-4o-2024-08-06").known, true);
    assert.equal(priceFor("gpt-4o-2024-08-06").inputPerMTok, 2_500_000);
    assert.equal(priceFor("gpt-4o-audio-preview").known, false, "no prefix guessing");
    assert.equal(priceFor("toString").known, false, "only own keys");
  });

  test("a config table is validated and used", () => {
    const t = parsePriceTable({
      "my-model": { inputPerMTok: 1_000_000, outputPerMTok: 3_000_000 },
    });
    assert.deepEqual(costMicros("my-model", { inputTokens: 2, outputTokens: 1 }, t), {
      micros: 5,
      known: true,
    });
    const merged = { ...DEFAULT_PRICE_TABLE, ...t };
    assert.equal(priceFor("gpt-5", merged).known, true);
  });

  test("bad config and bad usage are EVALIDATION naming the field", () => {
    const bad = (v: unknown) => () => parsePriceTable(v);
    assert.throws(bad([]), (e) => isAgentdError(e, "EVALIDATION") && e.field === "pricing");
    assert.throws(
      bad({ m: { inputPerMTok: 1.5, outputPerMTok: 1 } }),
      (e) => isAgentdError(e, "EVALIDATION") && e.field === "pricing.m.inputPerMTok",
    );
    assert.throws(
      bad({ m: { inputPerMTok: 1, outputPerMTok: -1 } }),
      (e) => isAgentdError(e, "EVALIDATION") && e.field === "pricing.m.outputPerMTok",
    );
    assert.throws(
      bad({ m: { inputPerMTok: 1, outputPerMTok: 1, cachedPerMTok: 1 } }),
      (e) => isAgentdError(e, "EVALIDATION") && e.field === "pricing.m.cachedPerMTok",
    );
    assert.throws(
      () => costMicros("gpt-4o", { inputTokens: -1, outputTokens: 0 }),
      (e) => isAgentdError(e, "EVALIDATION") && e.field === "usage.inputTokens",
    );
    assert.throws(
      () => costMicros("gpt-4o", { inputTokens: 0, outputTokens: 0.5 }),
      (e) => isAgentdError(e, "EVALIDATION") && e.field === "usage.outputTokens",
    );
  });

  test("the default table holds integer prices, above 0 for every provider's model", () => {
    for (const [model, p] of Object.entries(DEFAULT_PRICE_TABLE)) {
      const free = model === "replay"; // calls no provider
      assert.ok(Number.isSafeInteger(p.inputPerMTok) && (free || p.inputPerMTok > 0), model);
      assert.ok(Number.isSafeInteger(p.outputPerMTok) && (free || p.outputPerMTok > 0), model);
    }
    assert.deepEqual(priceFor("replay"), { inputPerMTok: 0, outputPerMTok: 0, known: true });
  });
});
