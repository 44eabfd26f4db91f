/**
 * Attack: a policy's regular expressions with nested quantifiers (`(a+)+$`), in a shadow
 * candidate tried on live traffic and in the enforced policy's redaction patterns, against
 * a command and an output made to make a backtracking engine take forever (2^40 steps).
 * Policy patterns are matched by RE2's automata (policy-regex.ts): the call is decided,
 * runs, and its output is redacted as if the patterns were harmless; a candidate's pattern
 * that does match still shows in its policy.shadow. (Before: the kernel never returned.)
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
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
const A = "a".repeat(40);
const B = "b".repeat(40);
const COMMAND = `echo ${A}! ${B}!`;

let dir = "";
let log: FileEventLog;
let sandbox: Sandbox;
let cleanup: (() => Promise<void>) | undefined;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-attack3-redos-"));
  log = await openFileEventLog({ dir: join(dir, "log"), fsync: false });
  ({ sandbox, cleanup } = await testSandbox());
});
after(async () => {
  await cleanup?.();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

function load(name: string, lines: string[]): Policy {
  const file = join(dir, name);
  writeFileSync(file, ["version: 1", `extends: ${join(ROOT, "policy.yaml")}`, ...lines].join("\n"));
  const r = readPolicyFile(file);
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.policy;
}

it("nested quantifiers in a candidate's deny patterns and the redaction patterns stall nothing", async () => {
  const enforced = load("enforced.yaml", ["redaction:", "  patterns: ['(b+)+c', '(b|bb)+!']"]);
  const candidate = load("candidate.yaml", [
    "risk:",
    "  denyCommandPatterns: ['(a+)+$', '(a|aa)*x', 'echo (a+)+!']",
  ]);
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
  const kernel = createKernel({
    log,
    policy: () => enforced,
    shadow: () => ({ policy: candidate, source: "server", path: "candidate.yaml" }),
    secretProviders: [],
  });
  const run = { ...q, fence: await log.bumpEpoch(q.runId), sandbox: box };
  await kernel.handle(run, { callId: "c1", tool: "process.run", input: { command: COMMAND } });
  const ps = (await log.read(q.runId, 0)).map((e) => e.event.payload);
  const shadow = ps.find((p) => p.case === "policyShadow");
  assert.ok(shadow?.case === "policyShadow", "the candidate's matching pattern is reported");
  assert.equal(shadow.value.candidate?.decision, Decision.DENY);
  assert.equal(shadow.value.candidate?.rule, "risk.denyCommandPatterns:2");
  const result = ps.find((p) => p.case === "toolResult");
  assert.ok(
    result?.case === "toolResult" && result.value.ok,
    "the call ran under the enforced policy",
  );
  const out = JSON.parse(result.value.outputJson) as {
    stdout?: string;
    result?: { stdout: string };
  };
  const stdout = out.result?.stdout ?? out.stdout ?? "";
  assert.match(stdout, new RegExp(`^${A}! \\[REDACTED\\]\\n$`), "(b|bb)+! redacted the b's");
  await box.destroy();
});
