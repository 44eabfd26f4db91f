/**
 * The policy's `reviewer` section and `approval: reviewer`: hostile and broken values are
 * refused with an error naming the field; defaults keep every existing policy valid.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { diffPolicies } from "../policy-diff.ts";
import { parsePolicy } from "../policy-loader.ts";

function errorsOf(yaml: string): string {
  const r = parsePolicy(`version: 1\n${yaml}`, "p.yaml");
  assert.equal(r.ok, false, `expected ${JSON.stringify(yaml)} to be refused`);
  return r.ok ? "" : r.errors.map((e) => `${e.field}: ${e.message}`).join("\n");
}

const reviewerCap = "capabilities:\n  process.run: { approval: reviewer }\n";

describe("policy: reviewer section", () => {
  it("defaults: no reviewer configured, personFor the risky facts", () => {
    const r = parsePolicy("version: 1\n", "p.yaml");
    assert.ok(r.ok);
    assert.deepEqual(r.policy.reviewer.personFor, [
      "highRiskCommand",
      "dynamicShell",
      "runWrittenScript",
      "touchesSecrets",
      "deletesFile",
    ]);
    assert.equal(r.policy.reviewer.model, undefined);
    assert.equal(r.policy.reviewer.minConfidence, 0.8);
  });

  it("takes a full reviewer section", () => {
    const r = parsePolicy(
      `version: 1\n${reviewerCap}reviewer: { model: gpt-x, rubric: "be careful", timeout: 10s, minConfidence: 0.9, personFor: [touchesConfig] }\n`,
      "p.yaml",
    );
    assert.ok(r.ok, JSON.stringify(r));
    assert.equal(r.policy.capabilities["process.run"]?.approval, "reviewer");
    assert.equal(r.policy.reviewer.timeout, 10_000);
  });

  it("agentd policy diff names a switch to the reviewer and its settings", () => {
    const a = parsePolicy("version: 1\n", "a.yaml");
    const b = parsePolicy(
      `version: 1\n${reviewerCap}reviewer: { model: gpt-x, rubric: r, minConfidence: 0.9 }\n`,
      "b.yaml",
    );
    assert.ok(a.ok && b.ok);
    const lines = diffPolicies(a.policy, b.policy).map((d) => d.text);
    assert.ok(
      lines.includes(
        "capability process.run: approval changed from risk (the risk rules decide) (not listed: the default) to reviewer (the model reviewer answers first; a person when it asks)",
      ),
      lines.join("\n"),
    );
    assert.ok(lines.some((l) => l.startsWith("reviewer.minConfidence: changed from 0.8 to 0.9")));
    assert.ok(lines.some((l) => l.startsWith("reviewer.model: changed from")));
  });

  it("approval: reviewer without a model or rubric names the missing field", () => {
    const e = errorsOf(reviewerCap);
    assert.match(e, /reviewer\.model.*capabilities\.process\.run\.approval is reviewer/);
    assert.match(e, /reviewer\.rubric/);
  });

  for (const [yaml, field] of [
    ["reviewer: { timeout: 0 }", /reviewer\.timeout/],
    ["reviewer: { timeout: 1h }", /reviewer\.timeout/],
    ["reviewer: { timeout: soon }", /reviewer\.timeout/],
    ["reviewer: { minConfidence: 1.5 }", /reviewer\.minConfidence/],
    ["reviewer: { minConfidence: -0.1 }", /reviewer\.minConfidence/],
    ['reviewer: { minConfidence: "high" }', /reviewer\.minConfidence/],
    ["reviewer: { personFor: [everything] }", /reviewer\.personFor/],
    ["reviewer: { model: 'gpt 4' }", /reviewer\.model/],
    ["reviewer: { model: '' }", /reviewer\.model/],
    [`reviewer: { rubric: "${"x".repeat(17 * 1024)}" }`, /reviewer\.rubric/],
    ["reviewer: { allowAll: true }", /reviewer/],
    ["capabilities:\n  process.run: { approval: model }", /capabilities\.process\.run\.approval/],
  ] as const) {
    it(`refuses ${yaml.slice(0, 60)}`, () => {
      assert.match(errorsOf(yaml), field);
    });
  }
});
