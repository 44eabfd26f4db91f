/**
 * A run's own budget (CreateRun's RunBudget) through a real drive: usage is in the log after
 * every model step (usage.updated, so GetRun shows it live), a run that reaches its token
 * or cost budget ends failed with ELIMIT_TOKENS / ELIMIT_COST and keeps its usage, and a
 * cancelled run keeps the usage it had. Real parts: the embedded log, a real container,
 * the kernel and the AI SDK against a scripted model reporting 20+8 tokens a step.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { costMicros, DEFAULT_PRICE_TABLE } from "../engine/pricing.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { RunState } from "../gen/agentd/v1/run_service_pb.js";
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
  dir = mkdtempSync(join(tmpdir(), "agentd-budget-"));
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

const reads = (n: number): StubReply[] =>
  Array.from({ length: n }, (_, i) => callReply(`r${i}`, "process.run", { command: `echo ${i}` }));

async function drive(budget: Parameters<typeof queueRun>[1]["budget"], calls: StubReply[]) {
  const run = await queueRun(log, { prompt: "spend", budget });
  script = [...calls, sayReply("done")];
  const deps = stubDriverDeps({ log, policy, sandbox, artifacts, baseURL: stub.baseURL });
  const outcome = await driveRun(
    deps,
    run.runId,
    await log.bumpEpoch(run.runId),
    new AbortController().signal,
  );
  const events = (await log.read(run.runId, 0)).map((e) => e.event);
  return { outcome, events, run: projectRun(run.runId, events) };
}

describe("a run's own budget", { timeout: 120_000 }, () => {
  it("usage is in the log after every step; the token budget ends the run ELIMIT_TOKENS", async () => {
    const { outcome, events, run } = await drive({ maxTokens: 70n }, reads(5));
    assert.equal(outcome, "failed");
    assert.equal(run.state, RunState.FAILED);
    assert.equal(run.error?.code, "ELIMIT_TOKENS");
    assert.match(
      run.error?.message ?? "",
      /the run's budget: the run used 56 of its 70 tokens and the next prompt alone is at least 20: the model was not asked/,
    );
    const usage = events.flatMap((e) =>
      e.payload.case === "usageUpdated" ? [e.payload.value] : [],
    );
    assert.deepEqual(
      usage.map((u) => [Number(u.usage?.inputTokens), Number(u.usage?.outputTokens), u.steps]),
      [
        [20, 8, 1],
        [40, 16, 2],
      ],
      "one usage.updated per step, cumulative",
    );
    assert.equal(Number(run.usage?.inputTokens), 40, "the failed run keeps its usage");
  });

  it("the cost budget ends the run ELIMIT_COST", async () => {
    const perStep = costMicros(
      "gpt-4o-mini",
      { inputTokens: 20, outputTokens: 8 },
      DEFAULT_PRICE_TABLE,
    ).micros;
    const { run } = await drive({ maxCostMicros: BigInt(Math.ceil(perStep * 1.5)) }, reads(5));
    assert.equal(run.error?.code, "ELIMIT_COST");
    assert.ok(Number(run.costMicros) >= perStep * 1.5, String(run.costMicros));
  });

  it("without a budget of its own the worker's limits hold and the run completes", async () => {
    const { outcome, run } = await drive(undefined, reads(2));
    assert.equal(outcome, "completed");
    assert.equal(Number(run.usage?.inputTokens), 50); // 2 calls (20 each) + the answer (10)
  });

  it("a cancelled run keeps the usage it had", async () => {
    const run = await queueRun(log, { prompt: "spend" });
    script = [...reads(1), callReply("slow", "process.run", { command: "sleep 30" })];
    const deps = stubDriverDeps({ log, policy, sandbox, artifacts, baseURL: stub.baseURL });
    const driving = driveRun(
      deps,
      run.runId,
      await log.bumpEpoch(run.runId),
      new AbortController().signal,
    );
    for (;;) {
      const evs = (await log.read(run.runId, 0)).map((e) => e.event);
      if (evs.some((e) => e.payload.case === "toolCall" && e.payload.value.callId === "slow"))
        break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const head = await log.head(run.runId);
    await log.append({
      runId: run.runId,
      sessionId: run.sessionId,
      payload: {
        case: "runCancelRequested",
        value: { $typeName: "agentd.v1.RunCancelRequested", reason: "enough", requestedBy: "t" },
      },
      expectedSeq: head?.seq,
    });
    assert.equal(await driving, "cancelled");
    const after = projectRun(
      run.runId,
      (await log.read(run.runId, 0)).map((e) => e.event),
    );
    assert.equal(after.state, RunState.CANCELLED);
    assert.equal(Number(after.usage?.inputTokens), 40);
    assert.ok(after.costMicros > 0n);
  });
});
