/**
 * finishesUnderCap: a result comes back from the worker; runaway work is stopped at the cap
 * and named; an error thrown in the worker is reported with what was being done.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { finishesUnderCap } from "./hard-cap.ts";

const FIXTURES = new URL("./hard-cap-fixtures.ts", import.meta.url);

it("gives back the function's result", async () => {
  assert.equal(await finishesUnderCap("doubling", FIXTURES, "double", [21]), 42);
});

it("stops runaway work at the cap and names it", async () => {
  // The work would take hours: the cap (1 s here) is what ends it, however loaded the machine.
  await assert.rejects(
    finishesUnderCap("a catastrophic regex", FIXTURES, "backtrack", [], 1000),
    /^Error: a catastrophic regex: still running after 1 s \(runaway work\); stopped$/,
  );
});

it("reports an error thrown in the worker, and a missing function", async () => {
  await assert.rejects(
    finishesUnderCap("failing", FIXTURES, "fail"),
    /^Error: failing: failed on purpose$/,
  );
  await assert.rejects(
    finishesUnderCap("missing", FIXTURES, "nope"),
    /^Error: missing: .*exports no function nope$/,
  );
});
