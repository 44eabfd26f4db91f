/**
 * Attack (on the report, not the enforcement): roll out a rule from an approval in shadow
 * first — exactly what shadow mode is for — and read a report that is wrong both ways.
 *
 * 1. The candidate adds `approvedCommands: [{command: git push, repo: web}]`. Enforced, a
 *    `git push origin feature` in a `web` run asks a person; the candidate would let it run
 *    (`approvedCommands:git push@web`). No policy.shadow is written: the report says the
 *    candidate changes nothing.
 * 2. The candidate is byte-for-byte the enforced policy, which has that entry. The enforced
 *    decision is `preview+auto` by the rule; the candidate's is "ask": a policy.shadow for a
 *    candidate that cannot differ, counted as "would ask".
 *
 * Why: shadow-decision.ts candidateStrict() calls decide(e.tool, a, c.policy, c.counters)
 * without the call's scope (kernel.ts scopeOf(run.repo, call)), so approvedCommandRule()
 * never matches for the candidate (nor on withFacts' re-decision).
 *
 * What must hold (docs/policy.md "Shadow mode"): the candidate is decided as the kernel
 * would decide it if it were enforced; a candidate equal to the enforced policy never
 * differs.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { Decision } from "../gen/agentd/v1/events_pb.js";
import type { Sandbox } from "../sandbox/port.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { sandboxImage, TEST_LIMITS, testSandbox } from "../testing/docker.ts";
import { queueRun } from "../testing/worker-fixtures.ts";
import { createKernel } from "./kernel.ts";
import { readPolicyFile } from "./policy-loader.ts";
import type { Policy } from "./policy-schema.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const WITH_RULE = [
  "version: 1",
  `extends: ${join(ROOT, "policy.yaml")}`,
  "approvedCommands:",
  "  - command: git push",
  "    repo: web",
].join("\n");
const WITHOUT = ["version: 1", `extends: ${join(ROOT, "policy.yaml")}`].join("\n");
let n = 0;
const load = (text: string): Policy => {
  const file = join(dir, `p${n++}.yaml`);
  writeFileSync(file, text);
  const r = readPolicyFile(file);
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.policy;
};

let dir = "";
let log: FileEventLog;
let sandbox: Sandbox;
let cleanup: (() => Promise<void>) | undefined;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-attack3-shadow-approved-"));
  log = await openFileEventLog({ dir: join(dir, "log"), fsync: false });
  const t = await testSandbox();
  sandbox = t.sandbox;
  cleanup = t.cleanup;
});
after(async () => {
  await cleanup?.();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function shadowsOf(enforced: Policy, candidate: Policy) {
  const q = await queueRun(log, { prompt: "p" });
  const box = await sandbox.create({
    runId: q.runId,
    tenantId: "t",
    image: sandboxImage("test"),
    limits: TEST_LIMITS,
    network: "none",
    workspaceTar: await packWorkspace([
      { path: "a.txt", type: "file", mode: 0o644, data: Buffer.from("a\n") },
    ]),
  });
  const run = { ...q, fence: await log.bumpEpoch(q.runId), sandbox: box, repo: "web" };
  const kernel = createKernel({
    log,
    policy: () => enforced,
    shadow: () => ({ policy: candidate, source: "server", path: "candidate.yaml" }),
    secretProviders: [],
  });
  await kernel.handle(run, {
    callId: "c1",
    tool: "process.run",
    input: { command: "git push origin feature" },
  });
  const ps = (await log.read(q.runId, 0)).map((e) => e.event.payload);
  const d = ps.find((p) => p.case === "policyDecision");
  return {
    decision: d?.case === "policyDecision" ? `${d.value.decision} ${d.value.rule}` : "none",
    shadows: ps.flatMap((p) => (p.case === "policyShadow" ? [p.value] : [])),
  };
}

describe("attack3: shadow mode and approvedCommands (rules from approvals)", () => {
  it("a candidate that adds a rule shows the calls it would let run", async () => {
    const r = await shadowsOf(load(WITHOUT), load(WITH_RULE));
    assert.equal(r.shadows.length, 1, `enforced ${r.decision}; no policy.shadow was written`);
    assert.equal(r.shadows[0]?.candidate?.decision, Decision.PREVIEW_AUTO);
    assert.equal(r.shadows[0]?.candidate?.rule, "approvedCommands:git push@web");
  });

  it("a candidate equal to the enforced policy never differs", async () => {
    const r = await shadowsOf(load(WITH_RULE), load(WITH_RULE));
    assert.equal(
      r.shadows.length,
      0,
      `enforced ${r.decision}; candidate said ${r.shadows.map((s) => `${s.candidate?.decision} ${s.candidate?.rule}`).join(", ")}`,
    );
  });
});
