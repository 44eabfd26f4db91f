/**
 * probeReplacing against a real container (the test image), and applyReplacing: an empty
 * source or a move onto an existing file makes the call destructive; a probe that fails
 * counts as both (fail closed).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { ulid } from "ulid";
import type { ExecResult, SandboxHandle } from "../sandbox/port.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { sandboxImage, TEST_LIMITS, testSandbox } from "../testing/docker.ts";
import { analyzeCommand } from "./command-analysis.ts";
import { decide } from "./decide.ts";
import { parsePolicy } from "./policy-loader.ts";
import { applyReplacing, needsReplacingProbe, probeReplacing } from "./replace-probe.ts";
import { assess, compileRisk } from "./risk.ts";

const parsed = parsePolicy(
  readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8"),
  "policy.yaml",
);
if (!parsed.ok) throw new Error("policy.yaml does not parse");
const policy = parsed.policy;

let box: SandboxHandle;
let cleanup: () => Promise<void>;

before(async () => {
  const t = await testSandbox();
  cleanup = t.cleanup;
  box = await t.sandbox.create({
    runId: ulid(),
    tenantId: "acme",
    image: sandboxImage("test"),
    limits: TEST_LIMITS,
    network: "none",
    workspaceTar: await packWorkspace([
      { path: "full.txt", type: "file", mode: 0o644, data: Buffer.from("content\n") },
      { path: "empty.txt", type: "file", mode: 0o644, data: Buffer.alloc(0) },
      { path: "dir", type: "directory", mode: 0o755 },
      { path: "dir/full.txt", type: "file", mode: 0o644, data: Buffer.from("x\n") },
      { path: "-n", type: "file", mode: 0o644, data: Buffer.alloc(0) },
    ]),
  });
});
after(async () => {
  await cleanup?.();
});

const found = async (line: string) => (await probeReplacing(box, analyzeCommand(line))).reasons;

describe("probeReplacing", () => {
  it("finds empty sources and moves onto existing files", async () => {
    assert.match((await found("cp empty.txt full.txt")).join(), /empty\.txt, which is empty/);
    assert.match((await found("cp /dev/stdin full.txt")).join(), /dev\/stdin/, "a device counts");
    assert.match((await found("cp -- -n full.txt")).join(), /-n, which is empty/);
    assert.match((await found("cat missing.txt > full.txt")).join(), /missing\.txt/);
    assert.match((await found("mv empty.txt full.txt")).join(), /onto full\.txt/);
    assert.match((await found("mv full.txt dir")).join(), /onto dir/, "dir/full.txt exists");
    assert.deepEqual(await found("cp full.txt new.txt"), []);
    assert.deepEqual(
      await found("head -c 4 /dev/zero > full.txt"),
      [],
      "a part of zeros is content",
    );
    const link = await box.exec({
      argv: ["ln", "-s", "/dev/null", "/workspace/nul"],
      timeoutMs: 10_000,
      maxOutputBytes: 1024,
    });
    assert.equal(link.exitCode, 0, link.stderr);
    assert.match((await found("cat nul > full.txt")).join(), /copies nul/, "a link to /dev/null");
    assert.deepEqual(await found("cp missing.txt new.txt"), [], "cp of nothing fails, leaves it");
    assert.deepEqual(await found("cat full.txt empty.txt > new.txt"), []);
    assert.deepEqual(await found("mv full.txt new.txt"), []);
    assert.deepEqual(await found("mv empty.txt dir"), [], "dir/empty.txt does not exist");
    assert.deepEqual(await found("cp empty.txt new.txt"), [], "a new file loses nothing");
    assert.match((await found("cp empty.txt dir/full.txt")).join(), /onto dir\/full\.txt/);
    assert.deepEqual(await found("cp empty.txt dir"), [], "dir/empty.txt is new");
    assert.match((await found("mv dir/full.txt .")).join(), /onto \./, "./full.txt exists");
    assert.equal(needsReplacingProbe(analyzeCommand("ls -la")), false);
  });
  it("judges sort -o, uniq IN OUT, a source the line made earlier and unseen output", async () => {
    assert.match((await found("sort -o full.txt /dev/null")).join(), /onto full\.txt/);
    assert.match((await found("sort --output=full.txt empty.txt")).join(), /onto full\.txt/);
    assert.deepEqual(await found("sort -o full.txt full.txt"), [], "sorting in place keeps it");
    assert.match((await found("uniq /dev/null full.txt")).join(), /onto full\.txt/);
    assert.deepEqual(await found("uniq full.txt new.txt"), []);
    // The probe runs before the line: what an earlier command of it made is unknown, so empty.
    assert.match((await found(": > e; cp e full.txt")).join(), /copies e, which is empty/);
    assert.match(
      (await found("head -c0 full.txt > /tmp/z; cp /tmp/z full.txt")).join(),
      /\/tmp\/z/,
    );
    assert.match(
      (await found("cp full.txt /tmp/n && grep -v x /tmp/n > full.txt")).join(),
      /copies \/tmp\/n/,
    );
    assert.deepEqual(await found("cp full.txt /tmp/n && grep -v x /tmp/n > new.txt"), []);
    assert.match((await found("awk 'BEGIN{}' > full.txt")).join(), /awk … > full\.txt/);
    assert.match((await found("diff empty.txt empty.txt > full.txt")).join(), /full\.txt/);
    assert.deepEqual(await found("awk 'BEGIN{}' > empty.txt"), [], "an empty file loses nothing");
    assert.deepEqual(await found("awk 'BEGIN{}' > new.txt"), [], "a new file loses nothing");
    assert.deepEqual(await found("echo hi > full.txt"), [], "the line shows what it writes");
    const onlyUploaded = async (line: string, up: string[]) =>
      (await probeReplacing(box, analyzeCommand(line), undefined, (p) => up.includes(p))).reasons;
    assert.deepEqual(
      await onlyUploaded("awk 'BEGIN{}' > full.txt", []),
      [],
      "a file the run made itself is the run's output",
    );
    assert.equal((await onlyUploaded("awk 'BEGIN{}' > full.txt", ["full.txt"])).length, 1);
  });
  it("fails closed when the probe cannot answer", async () => {
    const broken: SandboxHandle = {
      ...box,
      exec: async (): Promise<ExecResult> => {
        throw new Error("container gone");
      },
    };
    const r = await probeReplacing(broken, analyzeCommand("cp a b && mv c d"));
    assert.equal(r.reasons.length, 2, JSON.stringify(r));
  });
});

describe("applyReplacing", () => {
  it("makes the call destructive and high impact; nothing found changes nothing", () => {
    const a = assess("process.run", { command: "cp e f" }, policy, compileRisk(policy));
    assert.equal(decide("process.run", a, policy, {}).path, "preview+auto");
    const after = applyReplacing(
      a,
      { reasons: ["copies e, which is empty (empties the target)"] },
      policy,
    );
    const d = decide("process.run", after, policy, {});
    assert.equal(d.path, "preview+approval");
    assert.equal(d.rule, "risk.approvalWhen.highRiskCommand");
    assert.ok(after.matched.some((m) => m.startsWith("destructive:copies e")));
    assert.equal(after.risk.estimatedImpact, "high");
    assert.equal(a.risk.estimatedImpact, "low", "the input is not mutated");
    assert.equal(applyReplacing(a, { reasons: [] }, policy), a);
  });
});
