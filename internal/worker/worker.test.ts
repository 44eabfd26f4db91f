/**
 * A worker end to end on the in-process queue: claims a queued run, drives it to the end;
 * a run that pauses for an approval is released, re-enqueued after the approval (as
 * ResolveApproval does) and resumed by a worker. Real container, real HTTP model stub.
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
import { ApprovalDecision, ApprovalResolvedSchema } from "../gen/agentd/v1/events_pb.js";
import { RunState } from "../gen/agentd/v1/run_service_pb.js";
import { createKernel } from "../kernel/kernel.ts";
import { projectRun } from "../projections/run-projection.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { MemoryRunQueue } from "../scheduler/memory-run-queue.ts";
import { createLogger } from "../telemetry/logger.ts";
import { testSandbox } from "../testing/docker.ts";
import { type OpenAiStub, type StubReply, startOpenAiStub } from "../testing/openai-stub.ts";
import {
  approveInLog,
  callReply,
  queueRun,
  sayReply,
  testImagePolicy,
} from "../testing/worker-fixtures.ts";
import { DEFAULT_RUN_LIMITS } from "./run-driver.ts";
import { createWorker, type Worker } from "./worker.ts";

let dir: string;
let log: FileEventLog;
let queue: MemoryRunQueue;
let worker: Worker;
let stub: OpenAiStub;
let cleanupBoxes: () => Promise<void>;
const replies = new Map<string, StubReply[]>();

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-worker-"));
  log = await openFileEventLog({ dir: join(dir, "log") });
  const artifacts = new FsArtifactStore(join(dir, "artifacts"));
  const t = await testSandbox();
  cleanupBoxes = t.cleanup;
  // Each run's script is found by its prompt, which the model request carries.
  stub = await startOpenAiStub(({ body }) => {
    const text = JSON.stringify(body.messages);
    for (const [key, list] of replies)
      if (text.includes(key) && list.length > 0) return list.shift() as StubReply;
    return { status: 500, body: { error: { message: "no script" } } };
  });
  const policy = testImagePolicy();
  queue = new MemoryRunQueue({ log, leaseTtlMs: 2000, pollMs: 100 });
  worker = createWorker({
    queue,
    workerId: "w1",
    concurrency: 2,
    leaseTtlMs: 2000,
    blockMs: 200,
    logger: createLogger({ level: "silent" }),
    driver: {
      log,
      kernel: createKernel({ log, policy: () => policy, secretProviders: [] }),
      engine: createAiSdkEngine({
        model: createOpenAiModel({ baseURL: stub.baseURL, apiKey: "k", model: "gpt-4o-mini" }),
        maxRetries: 0,
      }),
      sandbox: t.sandbox,
      artifacts,
      policy: () => policy,
      skillsDir: join(import.meta.dirname, "..", "..", "skills"),
      systemPrompt: "You are a careful coding agent.",
      model: "gpt-4o-mini",
      prices: DEFAULT_PRICE_TABLE,
      limits: DEFAULT_RUN_LIMITS,
    },
  });
  worker.start();
  for (const [k, list] of Object.entries(scripts)) replies.set(k, list);
  async function put(): Promise<string> {
    return (
      await artifacts.put(
        await packWorkspace([
          { path: "a.txt", type: "file", mode: 0o644, data: Buffer.from("a\n") },
        ]),
      )
    ).digest;
  }
  workspaceDigest = await put();
});
after(async () => {
  await worker?.stop(5000);
  await queue?.close();
  await cleanupBoxes?.();
  await stub?.close();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

let workspaceDigest = "";
const call = callReply;
const say = sayReply;
const scripts: Record<string, StubReply[]> = {
  "task-simple": [call("c1", "repo.read", { path: "a.txt" }), say("Read it.")],
  "task-quick": [call("c1", "process.run", { command: "rm -f a.txt" }), say("Approved at once.")],
  "task-approval": [
    call("c1", "process.run", { command: "rm -f a.txt" }),
    say("Removed after approval."),
  ],
};

async function submit(prompt: string): Promise<{ runId: string; sessionId: string }> {
  const { runId, sessionId } = await queueRun(log, { prompt, workspaceDigest });
  await queue.enqueue({ runId, tenantId: "acme", sessionId, priority: 5 });
  return { runId, sessionId };
}

/** The run once in one of `states`; up to 120 s (generous: a loaded machine never fails it). */
async function waitState(runId: string, states: RunState[], ms = 120_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const run = projectRun(
      runId,
      (await log.read(runId, 0)).map((e) => e.event),
    );
    if (
      states.includes(run.state) &&
      (run.state !== RunState.PAUSED || run.pendingApprovalId !== "")
    )
      return run;
    if (Date.now() > deadline)
      throw new Error(
        `waited ${ms} ms: run ${runId} is ${RunState[run.state]}, wanted ${states.map((s) => RunState[s]).join("|")}`,
      );
    await new Promise((r) => setTimeout(r, 50));
  }
}

it("claims a queued run and drives it to completion", async () => {
  const { runId } = await submit("task-simple");
  const run = await waitState(runId, [RunState.COMPLETED, RunState.FAILED]);
  assert.equal(run.state, RunState.COMPLETED, run.error?.message);
  assert.equal(run.summary, "Read it.");
  for (let i = 0; i < 40 && (await queue.stateOf(runId)) !== "ended"; i++)
    await new Promise((r) => setTimeout(r, 50));
  assert.equal(await queue.stateOf(runId), "ended", "acknowledged once terminal");
});

it("releases a run paused for approval and resumes it after the approval is enqueued", async () => {
  const { runId, sessionId } = await submit("task-approval");
  const paused = await waitState(runId, [RunState.PAUSED, RunState.FAILED, RunState.COMPLETED]);
  assert.equal(paused.state, RunState.PAUSED);
  for (let i = 0; i < 40 && (await queue.stateOf(runId)) !== "paused"; i++)
    await new Promise((r) => setTimeout(r, 50));
  assert.equal(await queue.stateOf(runId), "paused");
  assert.equal(worker.active(), 0, "a paused run holds no worker");
  await approveInLog(log, { runId, sessionId }, paused.pendingApprovalId);
  await queue.enqueue({ runId, tenantId: "acme", sessionId, priority: 5 });
  const done = await waitState(runId, [RunState.COMPLETED, RunState.FAILED]);
  assert.equal(done.state, RunState.COMPLETED, done.error?.message);
  const types = (await log.read(runId, 0)).map((e) => e.type);
  assert.ok(types.includes("run.resumed"));
});

it("a run approved while its worker is still pausing it is resumed, not left paused", async () => {
  const { runId, sessionId } = await submit("task-quick");
  // Approve the moment the approval is requested, as a fast CI approver would: the worker
  // has not released the run yet, so the API's enqueue finds it claimed.
  const ac = AbortSignal.any([AbortSignal.timeout(20_000)]);
  const stop = new AbortController();
  for await (const ev of log.follow(runId, 0, AbortSignal.any([ac, stop.signal]))) {
    const p = ev.event.payload;
    if (p.case === "approvalRequested") {
      await log.append({
        runId,
        sessionId,
        payload: {
          case: "approvalResolved",
          value: create(ApprovalResolvedSchema, {
            approvalId: p.value.approvalId,
            decision: ApprovalDecision.APPROVE,
            resolvedBy: "ci",
          }),
        },
      });
      await queue.enqueue({ runId, tenantId: "acme", sessionId, priority: 5 });
      stop.abort();
    }
  }
  const done = await waitState(runId, [RunState.COMPLETED, RunState.FAILED]);
  const seen = (await log.read(runId, 0)).map((e) => e.type).join(" ");
  assert.equal(done.state, RunState.COMPLETED, `${done.error?.message}: ${seen}`);
});
