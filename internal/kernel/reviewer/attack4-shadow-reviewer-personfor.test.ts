/**
 * Attack (shadow mode): roll out a stricter reviewer policy in shadow first — the candidate
 * differs from the enforced one only in `reviewer.personFor` (it adds highRiskCommand, as
 * the default and the strict profile have it). On `rm src/b.ts` the enforced policy lets
 * the reviewer's allow run the call; the candidate would have asked a person. The log gets
 * no policy.shadow, so `agentctl policy report` says the candidate changes nothing — and
 * the same blind spot hides a candidate that raises `reviewer.minConfidence` or turns
 * personFor off (looser).
 *
 * Why it gets through: kernel.ts shadowOf() compares the policy decisions only
 * (shadow-decision.ts decisionsDiffer(): control path and rule); under `approval: reviewer`
 * both are `preview+approval`, `capabilities.process.run.approval=reviewer`, and what the
 * reviewer step then does (reviewer/ask-reviewer.ts personFactsOf() with the enforced
 * policy's personFor) is never evaluated for the candidate.
 *
 * What must hold (issue #29: a candidate "evaluated beside the enforced one on every call
 * without effect; each difference is an event (`policy.shadow`)"; docs/policy.md "Shadow
 * mode": "every call it would have decided differently is recorded"): a call the enforced
 * policy runs on the reviewer's allow and the candidate would send to a person gets a
 * policy.shadow (candidate: ask).
 */
import assert from "node:assert/strict";
import { rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { FsArtifactStore } from "../../artifacts/fs-artifact-store.ts";
import { scriptedReviewer, verdictText } from "../../testing/reviewer-model.ts";
import { strictReviewerSuite } from "../../testing/strict-reviewer-run.ts";
import { createKernel } from "../kernel.ts";
import { readPolicyFile } from "../policy-loader.ts";
import type { Policy } from "../policy-schema.ts";

const ROOT = join(import.meta.dirname, "..", "..", "..");
const suite = strictReviewerSuite();
const made: string[] = [];
after(async () => {
  for (const p of made) await rm(p, { recursive: true, force: true });
});

async function reviewerPolicy(name: string, personFor: string): Promise<Policy> {
  const path = join(tmpdir(), `agentd-attack4-${process.pid}-${name}.yaml`);
  made.push(path);
  await writeFile(
    path,
    [
      "version: 1",
      `extends: ${join(ROOT, "policy.yaml")}`,
      "capabilities:",
      "  process.run: { approval: reviewer }",
      "reviewer:",
      "  model: scripted-reviewer",
      "  rubric: Tidying is fine.",
      `  personFor: ${personFor}`,
    ].join("\n"),
  );
  const r = readPolicyFile(path);
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.policy;
}

describe("attack4: a candidate that differs in reviewer.personFor (shadow)", () => {
  it("rm src/b.ts runs on the reviewer's allow; the candidate would ask: one policy.shadow", async () => {
    const enforced = await reviewerPolicy("enforced", "[dynamicShell]");
    const candidate = await reviewerPolicy("candidate", "[highRiskCommand, dynamicShell]");
    const { run } = await suite.freshRun();
    const art = join(tmpdir(), `agentd-attack4-art-${process.pid}`);
    made.push(art);
    const reviewer = scriptedReviewer(verdictText("allow", 1, "removing a stray file"));
    const kernel = createKernel({
      log: suite.log(),
      policy: () => enforced,
      shadow: () => ({ policy: candidate, source: "server", path: "/etc/agentd/candidate.yaml" }),
      secretProviders: [],
      artifacts: new FsArtifactStore(art),
      reviewerModel: (id) => (id === "scripted-reviewer" ? reviewer.model : undefined),
    });
    const out = await kernel.handle(run, {
      callId: "c1",
      tool: "process.run",
      input: { command: "rm src/b.ts" },
    });
    assert.equal(out.kind, "result", "the enforced policy lets the reviewer's allow run it");
    const ps = (await suite.log().read(run.runId, 0)).map((e) => e.event.payload);
    const shadows = ps.flatMap((p) => (p.case === "policyShadow" ? [p.value] : []));
    assert.equal(
      shadows.length,
      1,
      "the candidate's personFor (highRiskCommand) would have sent rm to a person: one policy.shadow",
    );
  });
});
