/**
 * ATTACK (review of issue #27, budgets): a model the worker's price table does not know
 * costs 0 (pricing.ts), so a run's cost budget never binds for it: no request is capped by
 * it (drive-usage.ts outputAllowance skips the cost cap when the output price is 0) and
 * overLimit never sees the cost reach it. A run with a one-micro-dollar budget on such a
 * model takes every step it wants. Real parts: the embedded log, Docker, the kernel, the
 * AI SDK against the OpenAI-compatible stub.
 *
 * Must never: fake the driver or the sandbox.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { readPolicyFile } from "../kernel/policy-loader.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import { projectRun } from "../projections/run-projection.ts";
import type { Sandbox } from "../sandbox/port.ts";
import { sandboxImage, testSandbox } from "../testing/docker.ts";
import { stubDriverDeps } from "../testing/driver-deps.ts";
import { type OpenAiStub, type StubReply, startOpenAiStub } from "../testing/openai-stub.ts";
import { callReply, queueRun, sayReply } from "../testing/worker-fixtures.ts";
import { driveRun } from "./run-driver.ts";

let dir: string;
let log: FileEventLog;
let stub: OpenAiStub;
let script: StubReply[] = [];
let sandbox: Sandbox;
let policy: Policy;
let artifacts: FsArtifactStore;
let cleanup: () => Promise<void>;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-attack-cost-"));
  log = await openFileEventLog({ dir: join(dir, "log") });
  stub = await startOpenAiStub(() => script.shift() ?? { status: 500, body: {} });
  artifacts = new FsArtifactStore(join(dir, "artifacts"));
  const loaded = readPolicyFile(join(import.meta.dirname, "..", "..", "policy.yaml"));
  assert.ok(loaded.ok);
  policy = {
    ...loaded.policy,
    sandbox: { ...loaded.policy.sandbox, image: sandboxImage("test"), memory: 128 << 20 },
  };
  const t = await testSandbox();
  sandbox = t.sandbox;
  cleanup = t.cleanup;
});
after(async () => {
  await cleanup?.();
  await stub?.close();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("attack: a cost budget on a model the price table does not know", {
  timeout: 240_000,
}, () => {
  it("a one-micro-dollar budget still stops the run (or refuses it) instead of letting every step run", async () => {
    const run0 = await queueRun(log, { prompt: "spend", budget: { maxCostMicros: 1n } });
    script = [
      callReply("c1", "process.run", { command: "echo 1" }),
      callReply("c2", "process.run", { command: "echo 2" }),
      callReply("c3", "process.run", { command: "echo 3" }),
      sayReply("done"),
    ];
    const first = stub.requests.length;
    // The engine is the stub's gpt-4o-mini; the name priced is a fine-tune the table lacks.
    const deps = stubDriverDeps(
      { log, policy, sandbox, artifacts, baseURL: stub.baseURL },
      { model: "ft:gpt-4o-mini-2024-07-18:acme::x1" },
    );
    const outcome = await driveRun(
      deps,
      run0.runId,
      await log.bumpEpoch(run0.runId),
      new AbortController().signal,
    );
    const events = (await log.read(run0.runId, 0)).map((e) => e.event);
    const run = projectRun(run0.runId, events);
    const asked = stub.requests.length - first;
    assert.notEqual(
      outcome,
      "completed",
      `a 1-micro-USD budget let ${asked} model steps run (${run.usage?.inputTokens} input tokens), cost recorded ${run.costMicros ?? "?"}`,
    );
    assert.ok(asked <= 1, `${asked} model requests under a 1-micro-USD budget`);
  });
});
