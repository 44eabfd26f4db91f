/**
 * File times of archive entries: PAX `mtime` records read to the nanosecond, the ustar field
 * as the fallback, and every hostile value (malformed, negative, huge, in the future)
 * clamped into range without throwing.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type * as tar from "tar-stream";
import {
  clampTime,
  compareTimes,
  EPOCH_TIME,
  entryTime,
  MAX_TIME_SEC,
  parsePaxTime,
  timeHeader,
  timeOfMs,
} from "./workspace-times.ts";

/** A parsed header as tar-stream hands it out: only what the times are read from. */
const header = (mtime: Date, pax?: Record<string, string>): tar.Header =>
  ({ name: "f", mtime, ...(pax === undefined ? {} : { pax }) }) as tar.Header;

describe("workspace times", () => {
  it("reads a PAX mtime to the nanosecond (GNU tar --format=posix writes nine digits)", () => {
    assert.deepEqual(parsePaxTime("1700000000.123456789"), { sec: 1700000000, nsec: 123456789 });
    assert.deepEqual(parsePaxTime("1700000000.5"), { sec: 1700000000, nsec: 500000000 });
    assert.deepEqual(parsePaxTime("1700000000"), { sec: 1700000000, nsec: 0 });
    // More than nine digits: cut, never rounded into the next second.
    assert.deepEqual(parsePaxTime("1700000000.9999999999999"), {
      sec: 1700000000,
      nsec: 999999999,
    });
  });

  it("prefers the PAX record over the ustar seconds; falls back when it is not a time", () => {
    const ustar = new Date(1_600_000_000_000);
    assert.deepEqual(entryTime(header(ustar, { mtime: "1700000000.25" })), {
      sec: 1700000000,
      nsec: 250000000,
    });
    for (const bad of ["", "abc", "1.2.3", "1e9", " 12", "12 ", "+5", ".5", "5.", "0x10", "١٢"]) {
      assert.deepEqual(
        entryTime(header(ustar, { mtime: bad })),
        { sec: 1_600_000_000, nsec: 0 },
        `PAX mtime ${JSON.stringify(bad)} falls back to the ustar field`,
      );
    }
    assert.deepEqual(entryTime(header(ustar)), { sec: 1_600_000_000, nsec: 0 });
  });

  it("clamps hostile times: negative to the epoch, huge to the cap, unreadable to the epoch", () => {
    assert.deepEqual(parsePaxTime("-1"), EPOCH_TIME);
    assert.deepEqual(parsePaxTime("-0.000000001"), EPOCH_TIME);
    assert.deepEqual(parsePaxTime("-0"), EPOCH_TIME);
    assert.deepEqual(parsePaxTime("99999999999999999999"), { sec: MAX_TIME_SEC, nsec: 0 });
    // A 4 MiB record (tar-stream's cap on a PAX header) is no time: not parsed at all.
    assert.equal(parsePaxTime("9".repeat(4 * 1024 * 1024)), undefined);
    assert.equal(parsePaxTime(`1.${"0".repeat(100)}`), undefined);
    // The ustar field: base-256 negative, past 2038, or garbage (NaN).
    assert.deepEqual(entryTime(header(new Date(-5000))), EPOCH_TIME);
    assert.deepEqual(entryTime(header(new Date(8 ** 11 * 1000))), { sec: MAX_TIME_SEC, nsec: 0 });
    assert.deepEqual(entryTime(header(new Date(Number.NaN))), EPOCH_TIME);
    assert.deepEqual(entryTime({ name: "f" } as tar.Header), EPOCH_TIME);
    assert.deepEqual(clampTime({ sec: 1.5, nsec: 0 }), EPOCH_TIME);
    assert.deepEqual(clampTime({ sec: 10, nsec: 2e9 }), { sec: 10, nsec: 0 });
  });

  it("a time in the future is clamped to notAfter; earlier ones are kept as they are", () => {
    const now = timeOfMs(1_700_000_000_123);
    assert.deepEqual(now, { sec: 1_700_000_000, nsec: 123_999_999 });
    assert.deepEqual(clampTime({ sec: 1_800_000_000, nsec: 0 }, now), now);
    assert.deepEqual(clampTime({ sec: 1_700_000_000, nsec: 124_000_000 }, now), now);
    assert.deepEqual(clampTime({ sec: 1_700_000_000, nsec: 5 }, now), {
      sec: 1_700_000_000,
      nsec: 5,
    });
    assert.ok(compareTimes({ sec: 1, nsec: 2 }, { sec: 1, nsec: 3 }) < 0);
    assert.ok(compareTimes({ sec: 2, nsec: 0 }, { sec: 1, nsec: 999_999_999 }) > 0);
  });

  it("writes seconds in the ustar field and a PAX record only when there are nanoseconds", () => {
    assert.deepEqual(timeHeader({ sec: 1700000000, nsec: 0 }), {
      mtime: new Date(1_700_000_000_000),
    });
    assert.deepEqual(timeHeader({ sec: 1700000000, nsec: 120000000 }), {
      mtime: new Date(1_700_000_000_000),
      pax: { mtime: "1700000000.12" },
    });
    assert.deepEqual(timeHeader({ sec: 1700000000, nsec: 7 }).pax, {
      mtime: "1700000000.000000007",
    });
    // What it writes reads back the same.
    const t = { sec: 1_712_345_678, nsec: 900_000_001 };
    assert.deepEqual(parsePaxTime(timeHeader(t).pax?.mtime), t);
  });
});
