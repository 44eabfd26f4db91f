/** Rates as operators write them (--rate-limit): what is accepted, what is refused and why. */
import assert from "node:assert/strict";
import { it } from "node:test";
import { parseRate } from "./rate.ts";

it("N/s, N/m, a burst, off", () => {
  assert.deepEqual(parseRate("20/s"), { perSecond: 20, burst: 20 });
  assert.deepEqual(parseRate("20/s,burst=40"), { perSecond: 20, burst: 40 });
  assert.deepEqual(parseRate("600/m"), { perSecond: 10, burst: 10 });
  assert.deepEqual(parseRate("1/m"), { perSecond: 1 / 60, burst: 1 });
  assert.deepEqual(parseRate("0.5/s"), { perSecond: 0.5, burst: 1 });
  assert.equal(parseRate("off"), undefined);
  assert.equal(parseRate(""), undefined);
});

it("hostile: no unit, zero, negative, huge, junk after it", () => {
  for (const bad of ["20", "0/s", "-1/s", "2000000/s", "20/h", "20/s,burst=0", "20/s;rm", "1e3/s"])
    assert.equal(typeof parseRate(bad), "string", bad);
  assert.match(parseRate("20") as string, /expected N\/s or N\/m/);
});
