import assert from "node:assert/strict";
import { test } from "node:test";
import { parseByteSize } from "./byte-size.ts";
import { parseDuration } from "./duration.ts";

test("durations need a unit, are whole milliseconds, positive and bounded", () => {
  assert.equal(parseDuration("90s"), 90_000);
  assert.equal(parseDuration("1.5h"), 5_400_000);
  assert.equal(parseDuration("7d"), 604_800_000);
  assert.equal(parseDuration("250ms"), 250);
  for (const bad of ["30", "", "1y", "-1d", "0m", "1.0001ms", "1e3s", "5 d", "d", "99999999999w"]) {
    assert.equal(typeof parseDuration(bad), "string", bad);
  }
});

test("byte sizes: whole bytes, binary and decimal units, positive and safe", () => {
  assert.equal(parseByteSize(1024), 1024);
  assert.equal(parseByteSize("512KiB"), 524_288);
  assert.equal(parseByteSize("2GB"), 2e9);
  assert.equal(parseByteSize("1.5MiB"), 1_572_864);
  for (const bad of ["0", -1, 0.5, "1.5B", "10 gigs", "99999999TiB", "", "0x10"]) {
    assert.equal(typeof parseByteSize(bad), "string", String(bad));
  }
});
