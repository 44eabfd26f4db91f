/**
 * ATTACK (third review of issue #27 deliverable 1, after a64e740): the fix for the replace
 * probe's finding in `policy.decision` (attack-secret-probe-decision.test.ts) replaced the
 * decision's rule and reason with `secret.containment` (secret-containment.ts guardTaint),
 * but kept the assessment the probes changed: `risk.estimatedImpact` ("high" once the
 * container said a `mv` replaces a file, replace-probe.ts applyReplacing; or that a script
 * the command runs was written by the run, provenance.ts applyProvenance) goes to the same
 * `policy.decision` event, and `assessment.matched` (`destructive:mv … onto q/3 (replaces
 * an existing file)`, `provenance:run-written:q/3`) becomes the preview's `matchedRules` in
 * `approval.requested`. Both are in the event log before any person decides. The approved
 * program makes q/N for every 1 bit of the value's first byte; eight calls the model
 * proposes (each waits for a person, who has not decided) spell that byte in the log.
 * What must hold: what a held path is (exists, is empty, was written) does not reach the log
 * through any part of a decision or preview made before a person decides.
 *
 * Must never: fake the sandbox, the kernel or the log (real Docker, real Redis).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { containmentRun, SECRET } from "../testing/containment-run.ts";
import { containmentSuite, exitOk } from "../testing/containment-suite.ts";
import { indexWorkspace } from "./script-probe.ts";

const suite = containmentSuite();

/** The run's uploaded file (containment-run.ts). */
const HELLO = {
  path: "hello.txt",
  type: "file",
  mode: 0o644,
  data: Buffer.from("hello\n"),
} as const;

/** The probed command per bit j: its decision differs when q/j exists. */
const PROBES: Record<string, (j: number) => string> = {
  "the replace probe (mv onto a held name)": (j) => `mv hello.txt q/${j}`,
  "the provenance probe (sh of a held name)": (j) => `sh q/${j}`,
};

describe("attack: a probe's finding about a held name, in the decision's risk and the preview's matched rules", () => {
  for (const [name, command] of Object.entries(PROBES)) {
    it(`${name}: the log spells the value's first byte`, async () => {
      const f = await containmentRun(suite.stack, suite.sandbox, suite.kernel);
      // As a drive sets it: the upload's index (hello.txt only).
      f.run.baseIndex = async () => indexWorkspace([HELLO]);
      const w = await f.approved("process.run", {
        command: [
          'mkdir -p /workspace/q && c=$(printf %s "$ENV.DEMO_TOKEN" | od -An -N1 -tu1);',
          "j=0; while [ $j -lt 8 ]; do",
          "if [ $(( (c >> (7 - j)) & 1 )) -eq 1 ]; then echo x > /workspace/q/$j; fi;",
          "j=$((j + 1)); done",
        ].join(" "),
      });
      assert.equal(exitOk(w), true, JSON.stringify(w).slice(0, 600));
      const before = (await suite.stack.log.read(f.run.runId, 0)).length;
      for (let j = 0; j < 8; j++) {
        const r = await f.unapproved("process.run", { command: command(j) });
        assert.equal(r.kind, "paused", JSON.stringify(r).slice(0, 300));
      }
      let impact = 0;
      let rules = 0;
      let n = 0;
      for (const e of (await suite.stack.log.read(f.run.runId, 0)).slice(before)) {
        const p = e.event.payload;
        if (p.case === "policyDecision") {
          n++;
          impact = (impact << 1) | (p.value.risk?.estimatedImpact === "high" ? 1 : 0);
        }
        if (p.case === "approvalRequested") {
          const said = (p.value.preview?.matchedRules ?? []).some(
            (m) => m.startsWith("destructive:") || m.startsWith("provenance:run-written:"),
          );
          rules = (rules << 1) | (said ? 1 : 0);
        }
      }
      assert.equal(n, 8, "one decision per call");
      const first = SECRET.charCodeAt(0);
      assert.notEqual(impact, first, "policy.decision's estimatedImpact spells the first byte");
      assert.notEqual(rules, first, "approval.requested's matchedRules spell the first byte");
    });
  }
});
