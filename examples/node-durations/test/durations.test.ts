import assert from "node:assert/strict";
import { test } from "node:test";
import { parse, total } from "../src/durations.ts";

test("parses the units the dashboard uses", () => {
  assert.equal(parse("45s"), 45_000);
  assert.equal(parse("2m"), 120_000);
  assert.equal(parse("1.5h"), 5_400_000);
});

test("refuses what is not a duration", () => {
  assert.throws(() => parse("soon"), /not a duration/);
});

test("adds durations and shows the largest unit", () => {
  assert.equal(total(["30m", "30m"]), "1h");
  assert.equal(total(["20s", "25s"]), "45s");
});
