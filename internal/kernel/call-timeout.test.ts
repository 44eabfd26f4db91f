/**
 * A capability's timeout is the ceiling of one call: a model that asks process.run for an
 * hour under a policy that gives it one second is stopped after one second (real container,
 * embedded log). Asking for less than the ceiling is honoured.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ulid } from "ulid";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { queued } from "../eventlog/conformance.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { sandboxImage, TEST_LIMITS, testSandbox } from "../testing/docker.ts";
import { createKernel, type Kernel, type KernelRun } from "./kernel.ts";
import { parsePolicy } from "./policy-loader.ts";

const text = readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8");
const parsed = parsePolicy(text, "policy.yaml");
if (!parsed.ok) throw new Error("policy.yaml does not parse");
const policy = {
  ...parsed.policy,
  capabilities: {
    ...parsed.policy.capabilities,
    "process.run": { approval: "never" as const, timeout: 1000 },
  },
};

let dir = "";
let log: FileEventLog;
let kernel: Kernel;
let run: KernelRun;
let cleanup: (() => Promise<void>) | undefined;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "agentd-call-timeout-"));
  log = await openFileEventLog({ dir: join(dir, "log"), fsync: false });
  const t = await testSandbox();
  cleanup = t.cleanup;
  const runId = ulid();
  const box = await t.sandbox.create({
    runId,
    tenantId: "t",
    image: sandboxImage("test"),
    limits: TEST_LIMITS,
    network: "none",
    workspaceTar: await packWorkspace([
      { path: "a.txt", type: "file", mode: 0o644, data: Buffer.from("a\n") },
    ]),
  });
  await log.append(queued(runId, "t"));
  run = { runId, sessionId: "s1", fence: await log.bumpEpoch(runId), sandbox: box };
  const artifacts = new FsArtifactStore(join(dir, "artifacts"));
  kernel = createKernel({ log, policy: () => policy, secretProviders: [], artifacts });
});

after(async () => {
  await cleanup?.();
  await log?.close();
  await rm(dir, { recursive: true, force: true });
});

async function timed(callId: string, input: Record<string, unknown>) {
  const out = await kernel.handle(run, { callId, tool: "process.run", input });
  assert.equal(out.kind, "result");
  const output = out.kind === "result" ? (out.output as { timedOut?: boolean }) : {};
  return { timedOut: output.timedOut === true };
}

describe("a call's timeout is capped by its capability", () => {
  it("asking for an hour under a 1 s policy stops the call after about a second", async () => {
    // Under the hour it asked for, sleep 8 would end by itself: timedOut is the ceiling.
    const r = await timed("c1", { command: "sleep 8", timeoutMs: 3_600_000 });
    assert.equal(r.timedOut, true);
  });

  it("a call may ask for less than the ceiling", async () => {
    // Under the 1 s ceiling, sleep 0.6 would end by itself: timedOut is the 200 ms asked for.
    const r = await timed("c2", { command: "sleep 0.6", timeoutMs: 200 });
    assert.equal(r.timedOut, true);
  });

  it("a call that ends in time is not cut short", async () => {
    const r = await timed("c3", { command: "echo ok" });
    assert.equal(r.timedOut, false);
  });
});
