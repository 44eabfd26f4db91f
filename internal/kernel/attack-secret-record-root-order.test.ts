/**
 * ATTACK (review of issue #27 deliverable 1, "Names are held too, and so is the record's
 * shape"): docs/policy.md says every digest is bound and keyed "so a removal, a new file
 * and a changed one look alike". They do one by one, but the ORDER of a record's root
 * groups does not: writtenBetween lists the paths the scan after the call found (in the
 * scan's root order: /workspace first) and the removed ones after them, and sealWrites
 * groups records by root in that order. A root whose writes are all removals therefore
 * comes after every root with a new or changed path: the first record's root says whether
 * the call's /workspace writes were removals only — a bit per root and call that the
 * program chooses from the value, readable by anyone who reads the log without the key,
 * and not among the bits the doc counts (which roots, and each one's bucket).
 * Here each approved call either removes or changes one file of the repository (one
 * /workspace record either way, same bucket, same roots) and makes one in /tmp; eight
 * calls spell the value's first byte in the records' root order.
 * What must hold: a record's shape (order included) does not tell a removal from a change.
 *
 * Must never: fake the sandbox, the kernel or the log (real Docker, real Redis).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { containmentRun, SECRET } from "../testing/containment-run.ts";
import { containmentSuite, exitOk } from "../testing/containment-suite.ts";
import { parseHeld } from "./held-names.ts";

const suite = containmentSuite();

describe("attack: the order of a secret.written record's roots", () => {
  it("removal-only roots come last: eight calls spell a byte of the value", async () => {
    const f = await containmentRun(suite.stack, suite.sandbox, suite.kernel);
    // The repository's own files (no secret involved): r0 … r7.
    const made = await f.sh("for k in 0 1 2 3 4 5 6 7; do echo $k > /workspace/r$k; done");
    assert.equal(made.exitCode, 0, made.stderr);
    for (let k = 0; k < 8; k++) {
      const w = await f.approved("process.run", {
        command: [
          'c=$(printf %s "$ENV.DEMO_TOKEN" | od -An -N1 -tu1);',
          `echo x > /tmp/x${k};`,
          `if [ $(( (c >> ${7 - k}) & 1 )) -eq 1 ]; then rm /workspace/r${k}; else echo y >> /workspace/r${k}; fi`,
        ].join(" "),
      });
      assert.equal(exitOk(w), true, JSON.stringify(w).slice(0, 600));
    }
    // The log, read without the key: per call, the root of its record's first sealed entry.
    const firstRoot = new Map<string, string>();
    for (const e of await suite.stack.log.read(f.run.runId, 0)) {
      const p = e.event.payload;
      if (p.case !== "secretWritten") continue;
      const first = p.value.files.map((x) => parseHeld(x.path)).find((h) => h !== undefined);
      if (first !== undefined) firstRoot.set(p.value.callId, first.anchor);
    }
    const roots = [...firstRoot.values()];
    assert.equal(roots.length, 8, JSON.stringify([...firstRoot]));
    let byte = 0;
    for (const r of roots) byte = (byte << 1) | (r === "/workspace" ? 0 : 1);
    assert.notEqual(
      String.fromCharCode(byte),
      SECRET[0],
      `the records' root order spells the value's first byte (${roots.join(" ")})`,
    );
  });
});
