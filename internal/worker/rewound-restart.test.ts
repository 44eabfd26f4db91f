/**
 * A rewound log found by a drive that died before its run.failed: the next drive sees the
 * `log.rewound` record and fails the run (EREWOUND) before anything of it runs — no
 * container, no model step (the model stub answers nothing). In process against the
 * embedded log and real Docker.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { createAiSdkEngine, createOpenAiModel } from "../engine/ai-sdk-engine.ts";
import { DEFAULT_PRICE_TABLE } from "../engine/pricing.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { LogRewoundSchema } from "../gen/agentd/v1/events_pb.js";
import { createKernel } from "../kernel/kernel.ts";
import type { Sandbox } from "../sandbox/port.ts";
import { testSandbox } from "../testing/docker.ts";
import { type OpenAiStub, startOpenAiStub } from "../testing/openai-stub.ts";
import { queueRun, testImagePolicy } from "../testing/worker-fixtures.ts";
import { DEFAULT_RUN_LIMITS, driveRun } from "./run-driver.ts";

let dir: string;
let log: FileEventLog;
let sandbox: Sandbox;
let cleanupBoxes: () => Promise<void>;
let stub: OpenAiStub;
let modelCalls = 0;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-rewound-restart-"));
  log = await openFileEventLog({ dir: join(dir, "log") });
  const t = await testSandbox();
  sandbox = t.sandbox;
  cleanupBoxes = t.cleanup;
  stub = await startOpenAiStub(() => {
    modelCalls++;
    return { status: 500, body: { error: { message: "the model must not be asked" } } };
  });
});
after(async () => {
  await cleanupBoxes?.();
  await stub?.close();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

it("a log holding log.rewound without run.failed: the next drive fails the run, runs nothing", async () => {
  const policy = testImagePolicy();
  const run = await queueRun(log, { prompt: "anything" });
  await log.append({
    ...run,
    payload: {
      case: "logRewound",
      value: create(LogRewoundSchema, {
        expectedSeq: 9n,
        expectedHash: "a".repeat(64),
        storedSeq: 1n,
        storedHash: "b".repeat(64),
        writer: "worker-dead",
      }),
    },
  });
  const outcome = await driveRun(
    {
      log,
      kernel: createKernel({ log, policy: () => policy, secretProviders: [] }),
      engine: createAiSdkEngine({
        model: createOpenAiModel({ baseURL: stub.baseURL, apiKey: "k", model: "gpt-4o-mini" }),
        maxRetries: 0,
        retryBaseMs: 10,
      }),
      sandbox,
      artifacts: new FsArtifactStore(join(dir, "artifacts")),
      policy: () => policy,
      skillsDir: join(import.meta.dirname, "..", "..", "skills"),
      systemPrompt: "You are a careful coding agent.",
      model: "gpt-4o-mini",
      prices: DEFAULT_PRICE_TABLE,
      limits: DEFAULT_RUN_LIMITS,
      workerId: "worker-next",
    },
    run.runId,
    await log.bumpEpoch(run.runId),
    new AbortController().signal,
  );
  assert.equal(outcome, "failed");
  const types = (await log.read(run.runId, 0)).map((e) => e.event.payload);
  assert.deepEqual(
    types.map((p) => p.case),
    ["runQueued", "logRewound", "runFailed"],
  );
  const last = types.at(-1);
  assert.ok(last?.case === "runFailed");
  assert.equal(last.value.error?.code, "EREWOUND");
  assert.match(last.value.error?.message ?? "", /lost events after seq 1/);
  assert.equal(modelCalls, 0, "no model step");
  assert.equal(await sandbox.find(run.runId), undefined, "no container");
});
