/**
 * A run's own budget (CreateRun's RunBudget) through a real drive: usage is in the log after
 * every model step (usage.updated, so GetRun shows it live), a run that reaches its token
 * or cost budget ends failed with ELIMIT_TOKENS / ELIMIT_COST and keeps its usage, and a
 * cancelled run keeps the usage it had. Real parts: the embedded log, a real container,
 * the kernel and the AI SDK against a scripted model charging ~4 characters of the request
 * body a prompt token, and 8 output tokens a step.
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
import { startChargingStub } from "../testing/charging-stub.ts";
import { sandboxImage, testSandbox } from "../testing/docker.ts";
import { stubDriverDeps } from "../testing/driver-deps.ts";
import type { OpenAiStub, StubReply } from "../testing/openai-stub.ts";
import { callReply, queueRun, sayReply } from "../testing/worker-fixtures.ts";
import { driveRun } from "./run-driver.ts";

let dir: string;
let log: FileEventLog;
let stub: OpenAiStub;
let script: StubReply[] = [];
/** The prompt tokens the stub charged each request, in order. */
const charged: number[] = [];
let sandbox: Sandbox;
let policy: Policy;
let artifacts: FsArtifactStore;
let cleanup: () => Promise<void>;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-budget-"));
  log = await openFileEventLog({ dir: join(dir, "log") });
  stub = await startChargingStub(() => script.shift(), charged);
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
  const first = charged.length;
  const deps = stubDriverDeps({ log, policy, sandbox, artifacts, baseURL: stub.baseURL });
  const outcome = await driveRun(
    deps,
    run.runId,
    await log.bumpEpoch(run.runId),
    new AbortController().signal,
  );
  const events = (await log.read(run.runId, 0)).map((e) => e.event);
  return { outcome, events, run: projectRun(run.runId, events), charged: charged.slice(first) };
}

/** What the stub charged the first request of a run: the system prompt, the tools, the task. */
async function firstPrompt(): Promise<number> {
  const { charged: c } = await drive(undefined, []);
  return c[0] as number;
}

describe("a run's own budget", { timeout: 120_000 }, () => {
  it("usage is in the log after every step; the token budget ends the run ELIMIT_TOKENS", async () => {
    const p0 = await firstPrompt();
    // Room for two steps (their prompts and 8 output tokens each), not for a third.
    const budget = 2 * p0 + 300;
    const {
      outcome,
      events,
      run,
      charged: c,
    } = await drive({ maxTokens: BigInt(budget) }, reads(5));
    assert.equal(outcome, "failed");
    assert.equal(run.state, RunState.FAILED);
    assert.equal(run.error?.code, "ELIMIT_TOKENS");
    const used = (c[0] as number) + (c[1] as number) + 16;
    assert.match(
      run.error?.message ?? "",
      new RegExp(
        `the run's budget: the run used ${used} of its ${budget} tokens and the next prompt is estimated at \\d+, leaving less than 32 for the answer: the model was not asked`,
      ),
    );
    const usage = events.flatMap((e) =>
      e.payload.case === "usageUpdated" ? [e.payload.value] : [],
    );
    assert.deepEqual(
      usage.map((u) => [Number(u.usage?.inputTokens), Number(u.usage?.outputTokens), u.steps]),
      [
        [c[0], 8, 1],
        [(c[0] as number) + (c[1] as number), 16, 2],
      ],
      "one usage.updated per step, cumulative",
    );
    assert.equal(
      Number(run.usage?.inputTokens),
      (c[0] as number) + (c[1] as number),
      "the failed run keeps its usage",
    );
  });

  it("the cost budget ends the run ELIMIT_COST before the step that would pass it", async () => {
    const p0 = await firstPrompt();
    const perStep = costMicros(
      "gpt-4o-mini",
      { inputTokens: p0, outputTokens: 8 },
      DEFAULT_PRICE_TABLE,
    ).micros;
    const budget = Math.ceil(perStep * 1.5);
    const { run, charged: c } = await drive({ maxCostMicros: BigInt(budget) }, reads(5));
    assert.equal(run.error?.code, "ELIMIT_COST");
    assert.match(run.error?.message ?? "", /the model was not asked/);
    const cost = Number(run.costMicros);
    // The step's own prompt (its request names its own output maximum, so its size differs
    // from the first prompt's by a few characters).
    const paid = costMicros(
      "gpt-4o-mini",
      { inputTokens: c[0] as number, outputTokens: 8 },
      DEFAULT_PRICE_TABLE,
    ).micros;
    assert.equal(c.length, 1, "one request sent");
    assert.ok(cost >= paid && cost <= budget, `one step paid (${cost} of ${budget})`);
  });

  it("without a budget of its own the worker's limits hold and the run completes", async () => {
    const { outcome, run, charged: c } = await drive(undefined, reads(2));
    assert.equal(outcome, "completed");
    // 2 calls and the answer, each its charged prompt.
    assert.equal(
      Number(run.usage?.inputTokens),
      c.reduce((a, b) => a + b, 0),
    );
  });

  it("a cancelled run keeps the usage it had", async () => {
    const run = await queueRun(log, { prompt: "spend" });
    script = [...reads(1), callReply("slow", "process.run", { command: "sleep 30" })];
    const first = charged.length;
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
    const paid = charged.slice(first).reduce((a, b) => a + b, 0);
    assert.equal(Number(after.usage?.inputTokens), paid, "both steps' prompts");
    assert.ok(after.costMicros > 0n);
  });
});
