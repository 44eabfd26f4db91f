/**
 * At most once, in process against real parts (the embedded event log, real containers, the
 * kernel, the real OpenAI HTTP path against a scripted server): a drive loses its lease while
 * its call appends a line and sleeps (the epoch is bumped under it, as a takeover does, and
 * its halt signal says "lost", as the worker's lease keeper does), and a second drive takes
 * the run over. (A worker killed outright: chaos-once.test.ts, with real worker processes.) Proved by effect (the line is in the final patch once),
 * by the log (tool.started, then one tool.result `interrupted`) and by what the model is
 * told. The same for an approved call, one that needed no approval, and a cancel that lands
 * during the takeover (the call still gets its result before run.cancelled).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { createAiSdkEngine, createOpenAiModel } from "../engine/ai-sdk-engine.ts";
import { DEFAULT_PRICE_TABLE } from "../engine/pricing.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { Decision, type Event, RunCancelRequestedSchema } from "../gen/agentd/v1/events_pb.js";
import { createKernel } from "../kernel/kernel.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import type { Sandbox } from "../sandbox/port.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { testSandbox } from "../testing/docker.ts";
import { type OpenAiStub, type StubReply, startOpenAiStub } from "../testing/openai-stub.ts";
import {
  approveInLog,
  callReply,
  queueRun,
  sayReply,
  testImagePolicy,
} from "../testing/worker-fixtures.ts";
import { STARTED_UNKNOWN } from "./open-calls.ts";
import { DEFAULT_RUN_LIMITS, type DriveOutcome, type DriverDeps, driveRun } from "./run-driver.ts";

let dir: string;
let log: FileEventLog;
let artifacts: FsArtifactStore;
let sandbox: Sandbox;
let cleanupBoxes: () => Promise<void>;
let stub: OpenAiStub;
let script: StubReply[] = [];
let policy: Policy;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-once-"));
  log = await openFileEventLog({ dir: join(dir, "log") });
  artifacts = new FsArtifactStore(join(dir, "artifacts"));
  const t = await testSandbox();
  sandbox = t.sandbox;
  cleanupBoxes = t.cleanup;
  stub = await startOpenAiStub(
    () => script.shift() ?? { status: 500, body: { error: { message: "script exhausted" } } },
  );
  policy = testImagePolicy();
});
after(async () => {
  await cleanupBoxes?.();
  await stub?.close();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

function deps(workerId: string): DriverDeps {
  return {
    log,
    kernel: createKernel({ log, policy: () => policy, secretProviders: [] }),
    engine: createAiSdkEngine({
      model: createOpenAiModel({ baseURL: stub.baseURL, apiKey: "k", model: "gpt-4o-mini" }),
      maxRetries: 1,
      retryBaseMs: 10,
    }),
    sandbox,
    artifacts,
    policy: () => policy,
    skillsDir: join(import.meta.dirname, "..", "..", "skills"),
    systemPrompt: "You are a careful coding agent.",
    model: "gpt-4o-mini",
    prices: DEFAULT_PRICE_TABLE,
    limits: DEFAULT_RUN_LIMITS,
    workerId,
    // The first owner holds its run while the approval waits, and runs the call itself.
    approvalHoldMs: 60_000,
  };
}

async function newRun(file: string): Promise<{ runId: string; sessionId: string }> {
  const tar = await packWorkspace([
    { path: file, type: "file", mode: 0o644, data: Buffer.from("first: 1\n") },
  ]);
  const info = await artifacts.put(tar);
  return queueRun(log, {
    prompt: `Append a line to ${file}`,
    workspaceDigest: info.digest,
    workspaceSizeBytes: info.size,
  });
}

const events = async (runId: string): Promise<Event[]> =>
  (await log.read(runId, 0)).map((e) => e.event);

/** Polls the run's log until `pred` holds for one event (60 s: a loaded machine). */
async function waitFor(runId: string, what: string, pred: (e: Event) => boolean): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!(await events(runId)).some(pred)) {
    if (Date.now() > deadline) throw new Error(`no ${what} in run ${runId} after 60 s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * The first owner runs the run's call (a line appended, "appended" printed, a long sleep);
 * once its output shows the line was written, the run is taken from it (its epoch bumped, as
 * a takeover after a lease expiry does) and its lease keeper tells it the lease is lost (it
 * kills its call's own processes and its late result is refused). Answers the new epoch and
 * the first drive, perhaps still ending.
 */
async function ownerLosesRunMidCall(
  run: { runId: string; sessionId: string },
  approve: boolean,
): Promise<{ epoch: number; first: Promise<DriveOutcome | Error> }> {
  // What the first worker's lease keeper aborts when the lease is gone.
  const lost = new AbortController();
  const first = driveRun(deps("worker-a"), run.runId, await log.bumpEpoch(run.runId), {
    stop: lost.signal,
    halt: lost.signal,
  }).catch((err: Error) => err);
  if (approve) {
    await waitFor(run.runId, "approval.requested", (e) => e.payload.case === "approvalRequested");
    const req = (await events(run.runId)).find((e) => e.payload.case === "approvalRequested");
    assert.ok(req?.payload.case === "approvalRequested");
    await approveInLog(log, run, req.payload.value.approvalId);
  }
  await waitFor(
    run.runId,
    "the call's output",
    (e) => e.payload.case === "toolOutput" && e.payload.value.chunk.includes("appended"),
  );
  const epoch = await log.bumpEpoch(run.runId);
  lost.abort("lost");
  return { epoch, first };
}

/** The run's call c1: its tool.started and results, in log order. */
function recordOf(evs: Event[]): { types: string[]; code: string; message: string } {
  const mine = evs.filter(
    (e) =>
      (e.payload.case === "toolStarted" || e.payload.case === "toolResult") &&
      e.payload.value.callId === "c1",
  );
  const result = mine.find((e) => e.payload.case === "toolResult")?.payload;
  return {
    types: mine.map((e) => e.type),
    code: result?.case === "toolResult" ? (result.value.error?.code ?? "ok") : "",
    message: result?.case === "toolResult" ? (result.value.error?.message ?? "") : "",
  };
}

/** Lines the final patch adds to `file`. */
async function addedLines(evs: Event[], file: string): Promise<string[]> {
  const done = evs.find((e) => e.payload.case === "runCompleted")?.payload;
  assert.ok(done?.case === "runCompleted" && done.value.patchDigest !== "", "a patch");
  const parts: Uint8Array[] = [];
  for await (const c of artifacts.read(done.value.patchDigest)) parts.push(c);
  const patch = Buffer.concat(parts).toString("utf8");
  assert.match(patch, new RegExp(`\\+\\+\\+ b/${file.replace(".", "\\.")}`), patch);
  return patch.split("\n").filter((l) => l.startsWith("+") && !l.startsWith("+++"));
}

/** The model's request after the takeover shows c1's answer: interrupted, not run again. */
function modelWasTold(): void {
  const last = JSON.stringify(stub.requests.at(-1)?.body ?? {});
  assert.match(last, /interrupted/, "the model's next context holds the answer");
  assert.match(last, /It was not run again/, last.slice(-2000));
}

describe("a call whose owner died mid-execution runs at most once", () => {
  for (const approve of [true, false]) {
    const kind = approve ? "approved" : "auto";
    it(`${kind}: answered interrupted by the taker, never run again; the model is told`, {
      timeout: 180_000,
    }, async () => {
      const file = approve ? "config.yaml" : "notes.txt";
      const run = await newRun(file);
      script = [
        callReply("c1", "process.run", {
          command: `echo added >> ${file} && echo appended && sleep 60`,
        }),
        sayReply("The line is there; I will not append it again."),
      ];
      const { epoch, first } = await ownerLosesRunMidCall(run, approve);
      const outcome = await driveRun(
        deps("worker-b"),
        run.runId,
        epoch,
        new AbortController().signal,
      );
      assert.equal(outcome, "completed");
      const evs = await events(run.runId);
      const decided = evs.find((e) => e.payload.case === "policyDecision")?.payload;
      assert.ok(decided?.case === "policyDecision");
      assert.equal(
        decided.value.decision === Decision.PREVIEW_APPROVAL,
        approve,
        "approval as the policy says",
      );
      const rec = recordOf(evs);
      assert.deepEqual(rec.types, ["tool.started", "tool.result"]);
      assert.equal(rec.code, "interrupted");
      assert.equal(rec.message, STARTED_UNKNOWN);
      assert.deepEqual(await addedLines(evs, file), ["+added"], "the line was appended once");
      modelWasTold();
      // The first owner's late result (its process killed by the taker) was refused.
      const gone = await first;
      assert.ok(gone instanceof Error && /EFENCED|epoch/.test(gone.message), String(gone));
      assert.equal(evs.filter((e) => e.payload.case === "toolStarted").length, 1);
    });
  }

  it("a cancel that lands during the takeover still answers the call before run.cancelled", {
    timeout: 180_000,
  }, async () => {
    const run = await newRun("notes.txt");
    script = [
      callReply("c1", "process.run", {
        command: "echo added >> notes.txt && echo appended && sleep 60",
      }),
    ];
    const { epoch, first } = await ownerLosesRunMidCall(run, false);
    await log.append({
      runId: run.runId,
      sessionId: run.sessionId,
      payload: {
        case: "runCancelRequested",
        value: create(RunCancelRequestedSchema, { reason: "stop", requestedBy: "alice" }),
      },
    });
    const outcome = await driveRun(
      deps("worker-b"),
      run.runId,
      epoch,
      new AbortController().signal,
    );
    assert.equal(outcome, "cancelled");
    await first;
    const evs = await events(run.runId);
    const rec = recordOf(evs);
    assert.deepEqual(rec.types, ["tool.started", "tool.result"]);
    assert.equal(rec.code, "interrupted");
    const resultAt = evs.findIndex((e) => e.payload.case === "toolResult");
    assert.equal(evs.at(-1)?.type, "run.cancelled");
    assert.ok(resultAt < evs.length - 1, "the call's answer before the run's end");
    assert.equal(await sandbox.find(run.runId), undefined, "the container went");
  });
});
