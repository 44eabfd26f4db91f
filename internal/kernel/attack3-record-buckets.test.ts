/**
 * ATTACK (third review of issue #27 deliverable 1, after a64e740): held-names.ts pads each
 * root's records of a secret-carrying call to a power of two (at least 4) and docs/policy.md
 * accepts what is left: "a reader of the log learns which roots a call wrote under and each
 * one's bucket (4, 8, … 512), a few bits per approved call". Those bits are the program's
 * choice, so they are bits of the value: the guarantee is that none reaches the
 * log. Per root (/workspace, /tmp, /cache, /dev/shm, any other rw mount) the `secret.written`
 * record says none / 4 / 8 / … / 1024 / whole top-level entries / the whole root — about
 * 3–4 bits per root, some 12–16 bits per approved call, in the log with no later call at
 * all. Shown here with two bits of the value's first byte: bit 7 picks whether /dev/shm
 * gets a file, bit 6 whether /tmp gets 3 files or 20; two runs whose programs do the same
 * with the bits flipped must leave records of the same shape.
 * What must hold: the shape of what the log records about a secret-carrying call's writes
 * (roots, counts, buckets) does not depend on what the program did with the value (e.g. a
 * fixed record: every root, one fixed-size entry each, names checked by the key only).
 *
 * Must never: fake the sandbox, the kernel or the log (real Docker, real Redis).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { containmentRun } from "../testing/containment-run.ts";
import { containmentSuite, exitOk } from "../testing/containment-suite.ts";
import { anchorOf } from "./held-names.ts";

const suite = containmentSuite();

/** The approved program: two bits of the first byte (flipped when `flip`) pick what it writes. */
const program = (flip: boolean): string =>
  [
    'c=$(printf %s "$ENV.DEMO_TOKEN" | od -An -N1 -tu1);',
    `a=$(( ((c >> 7) & 1) ^ ${flip ? 1 : 0} )); b=$(( ((c >> 6) & 1) ^ ${flip ? 1 : 0} ));`,
    "if [ $a -eq 1 ]; then : > /dev/shm/s; fi;",
    "n=3; if [ $b -eq 1 ]; then n=20; fi; i=0; while [ $i -lt $n ]; do : > /tmp/t$i; i=$((i+1)); done",
  ].join(" ");

/** Per root, how many records the approved call's last `secret.written` holds. */
async function shape(flip: boolean): Promise<string> {
  const f = await containmentRun(suite.stack, suite.sandbox, suite.kernel);
  const w = await f.approved("process.run", { command: program(flip) });
  assert.equal(exitOk(w), true, JSON.stringify(w).slice(0, 600));
  const written = (await suite.stack.log.read(f.run.runId, 0))
    .map((e) => e.event.payload)
    .filter((p) => p.case === "secretWritten")
    .at(-1);
  const counts = new Map<string, number>();
  for (const file of written?.case === "secretWritten" ? written.value.files : []) {
    const root = anchorOf(file.path) ?? file.path;
    counts.set(root, (counts.get(root) ?? 0) + 1);
  }
  return JSON.stringify([...counts].sort());
}

describe("attack: the record's shape (roots, buckets) is the program's choice", () => {
  it("two bits of the value flip the log's record of the approved call", async () => {
    const a = await shape(false);
    const b = await shape(true);
    assert.equal(a, b, `the log's records differ with two bits of the value: ${a} vs ${b}`);
  });
});
