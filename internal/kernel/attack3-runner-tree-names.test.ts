/**
 * ATTACK (third review of issue #27 deliverable 1, after a64e740): the decision of a call
 * is made BEFORE the containment guard replaces it (kernel.ts handle: decideWithTrust, then
 * guardTaint), and the guard replaces only the decision's rule and reason. The assessment
 * stays as the probes left it, and its `matched` list becomes the preview's `matchedRules`
 * in `approval.requested` — in the event log before any person decides. For a runner call
 * (test.run, or `npm test`/`make` in process.run) withProvenance → runnerTreeWrites lists the
 * runner-tree entries that changed since the baseline BY NAME (`provenance:run-written:
 * node_modules/NAME`, runner-trees.ts treeChanges, provenance.ts applyProvenance). The
 * approved secret-carrying call makes `node_modules/NAME` where NAME is the value shifted by
 * one letter (no known form of it; held-names.ts keys such a name in `secret.written`, but
 * the runner-tree scan reads the container again and names it in clear). The model's next
 * call, test.run, waits for a person — and its approval request already spells the secret.
 * What must hold: nothing a probe of the container finds before a person decides (names,
 * whether a file changed, impact) reaches the log or the model while the run holds a secret.
 *
 * Must never: fake the sandbox, the kernel or the log (real Docker, real Redis).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { containmentRun, SECRET } from "../testing/containment-run.ts";
import { containmentSuite, exitOk } from "../testing/containment-suite.ts";

const suite = containmentSuite();

/** The value with every letter shifted by one (a→b, z→a), as `tr` below makes it. */
const shift = (s: string): string =>
  s.replace(/[a-zA-Z]/g, (c) => {
    const base = c <= "Z" ? 65 : 97;
    return String.fromCharCode(((c.charCodeAt(0) - base + 1) % 26) + base);
  });

describe("attack: runner-tree names in an approval request's matched rules", () => {
  it("a node_modules entry named by the secret is spelled in the log by the next (unapproved) test.run", async () => {
    const f = await containmentRun(suite.stack, suite.sandbox, suite.kernel);
    // As a drive sets it: the upload's index (nothing in it) and a pristine workspace.
    f.run.baseIndex = async () => new Map();
    f.run.pristine = true;
    const w = await f.approved("process.run", {
      command:
        'mkdir -p "/workspace/node_modules/$(printf %s "$ENV.DEMO_TOKEN" | tr A-Za-z B-ZAb-za)"',
    });
    assert.equal(exitOk(w), true, JSON.stringify(w).slice(0, 600));
    const before = (await suite.stack.log.read(f.run.runId, 0)).length;
    const r = await f.unapproved("test.run", {});
    const text = (await suite.stack.log.read(f.run.runId, 0))
      .slice(before)
      .map((e) => e.json)
      .join("\n");
    assert.equal(
      text.includes(shift(SECRET)),
      false,
      `the log after an unapproved test.run spells the secret (shifted by one letter): ${text.slice(0, 1500)}`,
    );
    assert.equal(
      JSON.stringify(r).includes(shift(SECRET)),
      false,
      "the model's answer spells the secret",
    );
  });
});
