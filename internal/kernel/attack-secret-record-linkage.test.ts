/**
 * ATTACK (review of issue #27 deliverable 1, "Names are held too, and so is the record's
 * shape"): padding is meant to leave a log reader only each root's bucket (4, 8, … 512),
 * "never a count". But a sealed digest is a deterministic function of path and content
 * (`h:MAC(pathMAC, digest)`), and a later call's record states each changed path's
 * `before` the same way. When an ordinary later call (approved for what it is: a build
 * that appends to its own logs) changes the files a hostile earlier call made, its
 * `before` values are exactly the earlier record's `digest` values: a reader of the log,
 * with no key, joins the two records and counts the earlier call's REAL entries (padding
 * never joins). The hostile call makes as many files as the value's first byte: the
 * join spells it, where the bucket (128) told one bit.
 * What must hold: no join of two records tells real entries from padding (a count stays
 * a bucket).
 *
 * Must never: fake the sandbox, the kernel or the log (real Docker, real Redis).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { containmentRun, SECRET } from "../testing/containment-run.ts";
import { containmentSuite, exitOk } from "../testing/containment-suite.ts";
import { parseHeld } from "./held-names.ts";

const suite = containmentSuite();

describe("attack: joining two secret.written records", () => {
  it("a later call's `before` values count the earlier call's real entries", async () => {
    const f = await containmentRun(suite.stack, suite.sandbox, suite.kernel);
    // The hostile approved call: as many files under /tmp/c as the value's first byte.
    const w = await f.approved("process.run", {
      command: [
        'n=$(printf %s "$ENV.DEMO_TOKEN" | od -An -N1 -tu1); mkdir -p /tmp/c && i=0;',
        "while [ $i -lt $n ]; do echo $i > /tmp/c/$i; i=$((i + 1)); done",
      ].join(" "),
    });
    assert.equal(exitOk(w), true, JSON.stringify(w).slice(0, 600));
    // An ordinary later call (every exec asks now; a person approves it for what it is).
    const later = await f.approved("process.run", {
      command: "for x in /tmp/c/*; do echo more >> $x; done",
    });
    assert.equal(exitOk(later), true, JSON.stringify(later).slice(0, 600));
    // The log, read without the key.
    const records = new Map<string, { root: string; digest: string; before: string }[]>();
    for (const e of await suite.stack.log.read(f.run.runId, 0)) {
      const p = e.event.payload;
      if (p.case !== "secretWritten") continue;
      records.set(
        p.value.callId,
        p.value.files.map((x) => ({
          root: parseHeld(x.path)?.anchor ?? x.path,
          digest: x.digest,
          before: x.before,
        })),
      );
    }
    const [first, second] = [...records.values()];
    assert.notEqual(second, undefined, "both calls have a record");
    const bucket = (first ?? []).filter((r) => r.root === "/tmp").length;
    const befores = new Set((second ?? []).map((r) => r.before));
    const joined = (first ?? []).filter((r) => r.root === "/tmp" && befores.has(r.digest)).length;
    assert.equal(bucket >= joined, true);
    assert.notEqual(
      String.fromCharCode(joined),
      SECRET[0],
      `joining the records counts the real entries (${joined} of a bucket of ${bucket}): the value's first byte`,
    );
  });
});
