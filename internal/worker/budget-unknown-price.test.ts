/**
 * A cost budget on a model the worker's price table does not know: such a model's cost
 * would count 0 (pricing.ts), so the budget could never bind — the run ends ELIMIT_COST
 * before its first model step, the model never asked, with a message naming the model and
 * the way to price it (--price-table). A fine-tune (`ft:BASE:…`) is not priced as its base.
 * A run without a cost budget on the same model, and the same model once priced, run as
 * before. Real parts: the embedded log, Docker, the kernel, the AI SDK against the
 * OpenAI-compatible stub.
 *
 * Must never: fake the driver or the sandbox.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { DEFAULT_PRICE_TABLE, parsePriceTable } from "../engine/pricing.ts";
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
import { type DriverDeps, driveRun } from "./run-driver.ts";

let dir: string;
let log: FileEventLog;
let stub: OpenAiStub;
let script: StubReply[] = [];
let sandbox: Sandbox;
let policy: Policy;
let artifacts: FsArtifactStore;
let cleanup: () => Promise<void>;

/** The engine is the stub's gpt-4o-mini; the name priced is a fine-tune the table lacks. */
const FINE_TUNE = "ft:gpt-4o-mini-2024-07-18:acme::x1";

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-budget-unpriced-"));
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

/** Three tool calls, then the answer: four model steps if nothing stops the run. */
const fourSteps = (): StubReply[] => [
  callReply("c1", "process.run", { command: "echo 1" }),
  callReply("c2", "process.run", { command: "echo 2" }),
  callReply("c3", "process.run", { command: "echo 3" }),
  sayReply("done"),
];

/** One drive of a fresh run on FINE_TUNE; its outcome, projection and model requests. */
async function drive(
  budget: Parameters<typeof queueRun>[1]["budget"],
  over: Partial<DriverDeps> = {},
) {
  const run0 = await queueRun(log, { prompt: "spend", ...(budget ? { budget } : {}) });
  script = fourSteps();
  const first = stub.requests.length;
  const deps = stubDriverDeps(
    { log, policy, sandbox, artifacts, baseURL: stub.baseURL },
    { model: FINE_TUNE, ...over },
  );
  const outcome = await driveRun(
    deps,
    run0.runId,
    await log.bumpEpoch(run0.runId),
    new AbortController().signal,
  );
  const run = projectRun(
    run0.runId,
    (await log.read(run0.runId, 0)).map((e) => e.event),
  );
  return { outcome, run, asked: stub.requests.length - first };
}

describe("a cost budget on a model without a price", { timeout: 240_000 }, () => {
  it("ends the run ELIMIT_COST before the model is asked, naming the model and --price-table", async () => {
    const { outcome, run, asked } = await drive({ maxCostMicros: 1n });
    assert.equal(
      asked,
      0,
      `${asked} model requests under a cost budget the price table cannot enforce (cost recorded ${run.costMicros ?? "?"})`,
    );
    assert.equal(outcome, "failed");
    assert.equal(run.state, RunState.FAILED);
    assert.equal(run.error?.code, "ELIMIT_COST");
    const message = run.error?.message ?? "";
    assert.match(message, /budget\.max_cost_micros cannot be enforced/);
    assert.ok(message.includes(JSON.stringify(FINE_TUNE)), `names the model: ${message}`);
    assert.match(message, /no price/);
    assert.match(message, /--price-table/);
    assert.match(message, /not priced as its base model/);
  });

  it("a generous budget is refused all the same: the cost could never be counted", async () => {
    const { outcome, run, asked } = await drive({ maxCostMicros: 100_000_000n });
    assert.equal(asked, 0);
    assert.equal(outcome, "failed");
    assert.equal(run.error?.code, "ELIMIT_COST");
  });

  it("a run without a cost budget on the same model runs every step", async () => {
    const { outcome, asked } = await drive(undefined);
    assert.equal(outcome, "completed");
    assert.equal(asked, 4);
  });

  it("the model given a price (--price-table) runs under its cost budget and is charged", async () => {
    const prices = {
      ...DEFAULT_PRICE_TABLE,
      ...parsePriceTable({ [FINE_TUNE]: { inputPerMTok: 300_000, outputPerMTok: 1_200_000 } }),
    };
    const { outcome, run, asked } = await drive({ maxCostMicros: 100_000_000n }, { prices });
    assert.equal(outcome, "completed");
    assert.equal(asked, 4);
    assert.ok((run.costMicros ?? 0n) > 0n, `cost recorded ${run.costMicros}`);
  });
});
