import assert from "node:assert/strict";
import { test } from "node:test";
import { until } from "./until.ts";

test("until returns the first answer that is not undefined, null or false", async () => {
  let n = 0;
  const got = await until("the third probe", () => (++n === 3 ? { n } : n === 1 ? null : false), {
    everyMs: 1,
  });
  assert.deepEqual(got, { n: 3 });
});

test("until fails naming what it waited for and what it saw; a probe's own error passes through", async () => {
  await assert.rejects(
    until("a thing that never happens", () => undefined, {
      capMs: 20,
      everyMs: 1,
      detail: () => "saw: nothing",
    }),
    /never happened within 0\.02 s: a thing that never happens\nsaw: nothing/,
  );
  await assert.rejects(
    until("a probe that throws", () => {
      throw new Error("probe broke");
    }),
    /probe broke/,
  );
});
