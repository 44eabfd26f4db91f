/** applyProvenance: a script the run wrote or changed makes the call high risk. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { decide } from "./decide.ts";
import { parsePolicy } from "./policy-loader.ts";
import type { Policy } from "./policy-schema.ts";
import { applyProvenance, RUN_WRITTEN_SCRIPT } from "./provenance.ts";
import { assess, compileRisk } from "./risk.ts";

const parsed = parsePolicy(
  readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8"),
  "p",
);
if (!parsed.ok) throw new Error("policy.yaml does not parse");
const base: Policy = parsed.policy;
const when = (over: Partial<Policy["risk"]["approvalWhen"]>): Policy => ({
  ...base,
  risk: { ...base.risk, approvalWhen: { ...base.risk.approvalWhen, ...over } },
});
const judge = (command: string, changed: string[], p: Policy = base) => {
  const before = assess("process.run", { command }, p, compileRisk(p));
  const after = applyProvenance(before, new Set(changed), p);
  return { before, after, d: decide("process.run", after, p, {}) };
};

describe("applyProvenance", () => {
  it("adds the fact, the matched rule and high impact for a changed script", () => {
    const { before, after, d } = judge("sh s.sh", ["s.sh"]);
    assert.deepEqual(before.scripts, ["s.sh"]);
    assert.equal(after.risk.estimatedImpact, "high");
    assert.ok(after.matched.includes("provenance:run-written:s.sh"));
    assert.deepEqual(after.approvalFacts, [
      RUN_WRITTEN_SCRIPT,
      "risk.approvalWhen.impactAtLeast:high",
    ]);
    assert.equal(d.path, "preview+approval");
    assert.equal(d.rule, RUN_WRITTEN_SCRIPT);
    assert.equal(before.risk.estimatedImpact, "low", "the input assessment is not mutated");
    assert.deepEqual(before.approvalFacts, []);
  });
  it("returns the assessment itself when nothing it runs changed, or it is denied", () => {
    const { before, after } = judge("sh s.sh", ["t.sh"]);
    assert.equal(after, before);
    const denied = judge("sudo sh s.sh", ["s.sh"]);
    assert.equal(denied.after, denied.before);
    const none = judge("ls", ["s.sh"]);
    assert.equal(none.after, none.before);
  });
  it("follows the policy: runWrittenScript off still leaves the impact", () => {
    const off = judge("sh s.sh", ["s.sh"], when({ runWrittenScript: false }));
    assert.deepEqual(off.after.approvalFacts, ["risk.approvalWhen.impactAtLeast:high"]);
    const neither = judge(
      "sh s.sh",
      ["s.sh"],
      when({ runWrittenScript: false, impactAtLeast: "never" }),
    );
    assert.deepEqual(neither.after.approvalFacts, []);
    assert.equal(neither.d.path, "preview+auto");
  });
});
