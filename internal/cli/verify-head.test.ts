/**
 * `agentctl verify --head SEQ:HASH`: the flag is parsed strictly (errors name --head and
 * never echo more than a prefix of what was given), and the verdict names the seq after
 * which a stored log lost events — from the log's own log.rewound record when it has one.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { UsageError } from "./client.ts";
import { headVerdict, parseHead, recordedLoss } from "./verify-head.ts";

const H = (c: string) => c.repeat(64);
const ev = (seq: number, hash: string, extra: Record<string, unknown> = {}) => ({
  seq: String(seq),
  hash,
  type: "output.delta",
  ...extra,
});

it("parses SEQ:HASH and refuses anything else, naming --head", () => {
  assert.deepEqual(parseHead(`12:${H("a")}`), { seq: 12, hash: H("a") });
  assert.deepEqual(parseHead(` 3:${H("0")}\n`), { seq: 3, hash: H("0") });
  for (const bad of [
    "",
    "12",
    `:${H("a")}`,
    `0:${H("a")}`,
    `-1:${H("a")}`,
    `1.5:${H("a")}`,
    `12:${H("A")}`, // upper case: hashes are printed lower case
    `12:${"a".repeat(63)}`,
    `12:${"a".repeat(65)}`,
    `12:${H("g")}`,
    `1234567890123456:${H("a")}`,
    `12:${H("a")}:extra`,
    `12 :${H("a")}`,
    `${"9".repeat(5000)}:${H("a")}`,
  ]) {
    assert.throws(
      () => parseHead(bad),
      (e: unknown) =>
        e instanceof UsageError &&
        /^--head must be SEQ:HASH/.test(e.message) &&
        e.message.length < 400,
      JSON.stringify(bad.slice(0, 40)),
    );
  }
});

it("a log that holds the head: no verdict; one that grew past it: none either", () => {
  const log = [ev(1, H("1")), ev(2, H("2")), ev(3, H("3"))];
  assert.equal(headVerdict("R", log, { seq: 3, hash: H("3") }), undefined);
  assert.equal(headVerdict("R", log, { seq: 2, hash: H("2") }), undefined);
});

it("a log shorter than the head: lost events after its end", () => {
  const log = [ev(1, H("1")), ev(2, H("2"))];
  assert.match(
    headVerdict("R", log, { seq: 5, hash: H("5") }) ?? "",
    /^run R: the stored log lost events after seq 2: you saw seq 5 \(hash 5{64}\) but the log ends at seq 2$/,
  );
});

it("another event at the head's seq: the log's log.rewound record says where the loss began", () => {
  const rec = ev(3, H("r"), {
    type: "log.rewound",
    logRewound: { expectedSeq: "5", expectedHash: H("5"), storedSeq: "2", storedHash: H("2") },
  });
  const log = [ev(1, H("1")), ev(2, H("2")), rec, ev(4, H("f")), ev(5, H("x"))];
  assert.deepEqual(recordedLoss(log), { atSeq: 3, storedSeq: 2, expectedSeq: 5 });
  assert.match(headVerdict("R", log, { seq: 5, hash: H("5") }) ?? "", /lost events after seq 2:/);
  // Without a record, all that is known is that the event at that seq is another one.
  const bare = [ev(1, H("1")), ev(2, H("2")), ev(3, H("9"))];
  assert.match(
    headVerdict("R", bare, { seq: 3, hash: H("3") }) ?? "",
    /lost events at or before seq 3 \(it holds another event there, hash 9{64}\)/,
  );
});
