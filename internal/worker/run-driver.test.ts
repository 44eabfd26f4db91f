/**
 * The run driver against real parts: the embedded event log, a real container, the kernel,
 * and the real @ai-sdk/openai HTTP path against a scripted OpenAI-compatible server.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { ulid } from "ulid";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { createAiSdkEngine, createOpenAiModel } from "../engine/ai-sdk-engine.ts";
import { DEFAULT_PRICE_TABLE } from "../engine/pricing.ts";
import { isAgentdError } from "../errors.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { verifyChain } from "../eventlog/hash-chain.ts";
import {
  type Event,
  RunCancelledSchema,
  RunCancelRequestedSchema,
  RunQueuedSchema,
  ToolCallSchema,
} from "../gen/agentd/v1/events_pb.js";
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
import { DEFAULT_RUN_LIMITS, type DriverDeps, driveRun } from "./run-driver.ts";

let dir: string;
let log: FileEventLog;
let artifacts: FsArtifactStore;
let sandbox: Sandbox;
let cleanupBoxes: () => Promise<void>;
let stub: OpenAiStub;
/** The replies the model gives, in order, per test. */
let script: StubReply[] = [];
let policy: Policy;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-driver-"));
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

function deps(over: Partial<DriverDeps> = {}, baseURL = stub.baseURL): DriverDeps {
  const kernel = createKernel({ log, policy: () => policy, secretProviders: [] });
  const engine = createAiSdkEngine({
    model: createOpenAiModel({ baseURL, apiKey: "test-key", model: "gpt-4o-mini" }),
    maxRetries: 1,
    retryBaseMs: 10,
  });
  return {
    log,
    kernel,
    engine,
    sandbox,
    artifacts,
    policy: () => policy,
    skillsDir: join(import.meta.dirname, "..", "..", "skills"),
    systemPrompt: "You are a careful coding agent.",
    model: "gpt-4o-mini",
    prices: DEFAULT_PRICE_TABLE,
    limits: DEFAULT_RUN_LIMITS,
    workerId: "test-worker",
    ...over,
  };
}

async function newRun(
  prompt = "Fix the greeting in hello.txt",
): Promise<{ runId: string; sessionId: string }> {
  const tar = await packWorkspace([
    { path: "hello.txt", type: "file", mode: 0o644, data: Buffer.from("helo\n") },
  ]);
  const info = await artifacts.put(tar);
  return queueRun(log, { prompt, workspaceDigest: info.digest, workspaceSizeBytes: info.size });
}

const call = callReply;
const say = sayReply;
const readArtifact = async (digest: string): Promise<string> => {
  const parts: Uint8Array[] = [];
  for await (const c of artifacts.read(digest)) parts.push(c);
  return Buffer.concat(parts).toString("utf8");
};
const types = async (runId: string) => (await log.read(runId, 0)).map((e) => e.type);

/**
 * The first event of `kind` in the run, polled for up to 120 s: generous, so that a loaded
 * machine (a container starting slowly) never fails it; only a run that never gets there does.
 */
async function waitFor<C extends NonNullable<Event["payload"]["case"]>>(
  runId: string,
  kind: C,
): Promise<Extract<Event["payload"], { case: C }>["value"]> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const ev = (await log.read(runId, 0)).find((e) => e.event.payload.case === kind);
    if (ev !== undefined) return ev.event.payload.value as never;
    if (Date.now() > deadline)
      throw new Error(
        `waited 120 s for ${kind} in run ${runId}: ${(await types(runId)).join(" ")}`,
      );
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("run driver", () => {
  it("reads, patches, answers, and completes with a patch artifact and a verified chain", async () => {
    const { runId } = await newRun();
    script = [
      call("c1", "repo.read", { path: "hello.txt" }),
      call("c2", "repo.patch", {
        path: "hello.txt",
        edits: [{ oldText: "helo", newText: "hello" }],
      }),
      say("Fixed the typo."),
    ];
    const outcome = await driveRun(
      deps(),
      runId,
      await log.bumpEpoch(runId),
      new AbortController().signal,
    );
    assert.equal(outcome, "completed");
    const t = await types(runId);
    assert.deepEqual(
      t.filter((x) => x.startsWith("run.")),
      ["run.queued", "run.started", "run.completed"],
    );
    assert.equal(t.filter((x) => x === "tool.result").length, 2);
    assert.ok(t.includes("output.delta") && t.includes("output.message"));
    const evs = await log.read(runId, 0);
    const done = evs.at(-1)?.event.payload;
    assert.ok(done?.case === "runCompleted");
    assert.equal(done.value.summary, "Fixed the typo.");
    assert.ok(done.value.usage && done.value.usage.inputTokens > 0n);
    const patch = await readArtifact(done.value.patchDigest);
    assert.match(patch, /-helo\n\+hello/);
    assert.equal(verifyChain(evs.map((e) => e.json)).ok, true);
    assert.equal(await sandbox.find(runId), undefined, "the container is gone");
    // The model saw the tools declared and its earlier results.
    const last = stub.requests.at(-1)?.body;
    assert.ok(
      last.tools.some((x: { function: { name: string } }) => x.function.name === "repo_patch"),
    );
    assert.ok(JSON.stringify(last.messages).includes("helo"));
  });

  it("pauses for an approval holding no container, then resumes from the snapshot after approval", async () => {
    const { runId, sessionId } = await newRun("Remove hello.txt");
    script = [call("c1", "process.run", { command: "rm -f hello.txt" })];
    assert.equal(
      await driveRun(deps(), runId, await log.bumpEpoch(runId), new AbortController().signal),
      "paused",
    );
    assert.deepEqual((await types(runId)).slice(-4), [
      "policy.decision",
      "approval.requested",
      "run.paused",
      "artifact.emitted",
    ]);
    const evs = (await log.read(runId, 0)).map((e) => e.event);
    const req = evs.find((e) => e.payload.case === "approvalRequested");
    assert.ok(req?.payload.case === "approvalRequested");
    assert.ok(evs.some((e) => e.payload.case === "runPaused"));
    assert.ok(
      evs.some(
        (e) =>
          e.payload.case === "artifactEmitted" && e.payload.value.name === "workspace-snapshot",
      ),
    );
    assert.equal(await sandbox.find(runId), undefined, "a paused run holds no container");
    await approveInLog(log, { runId, sessionId }, req.payload.value.approvalId);
    script = [say("Removed.")];
    assert.equal(
      await driveRun(deps(), runId, await log.bumpEpoch(runId), new AbortController().signal),
      "completed",
    );
    const t = await types(runId);
    assert.ok(t.includes("run.resumed"));
    const done = (await log.read(runId, 0)).at(-1)?.event.payload;
    assert.ok(done?.case === "runCompleted");
    const patch = await readArtifact(done.value.patchDigest);
    assert.match(
      patch,
      /deleted file mode 100644/,
      "the restored workspace had the file; the approved rm removed it",
    );
    assert.deepEqual(
      [done.value.usage?.inputTokens, done.value.usage?.outputTokens],
      [30n, 13n],
      "usage of the step before the pause is kept",
    );
  });

  it("holds the run and its container while the approval is resolved in time, then goes on in it", async () => {
    const { runId, sessionId } = await newRun("Remove hello.txt");
    script = [call("c1", "process.run", { command: "rm -f hello.txt" }), say("Removed.")];
    const driving = driveRun(
      deps({ approvalHoldMs: 30_000 }),
      runId,
      await log.bumpEpoch(runId),
      new AbortController().signal,
    );
    const req = await waitFor(runId, "approvalRequested");
    const box = await sandbox.find(runId);
    assert.ok(box !== undefined, "the held run keeps its container");
    await approveInLog(log, { runId, sessionId }, req.approvalId);
    assert.equal(await driving, "completed");
    const t = await types(runId);
    assert.deepEqual(
      t.filter(
        (x) => x.startsWith("run.") || x.startsWith("approval.") || x === "artifact.emitted",
      ),
      [
        "run.queued",
        "run.started",
        "approval.requested",
        "run.paused",
        "approval.resolved",
        "run.resumed",
        "artifact.emitted",
        "run.completed",
      ],
      "no workspace snapshot, one container",
    );
    const done = (await log.read(runId, 0)).at(-1)?.event.payload;
    assert.ok(done?.case === "runCompleted");
    assert.match(await readArtifact(done.value.patchDigest), /deleted file mode 100644/);
    assert.equal(await sandbox.find(runId), undefined, "removed at the end");
  });

  it("pauses for real when the hold runs out; a takeover of a held run waits without resuming", async () => {
    const { runId, sessionId } = await newRun("Remove hello.txt");
    script = [call("c1", "process.run", { command: "rm -f hello.txt" })];
    const t0 = Date.now();
    assert.equal(
      await driveRun(
        deps({ approvalHoldMs: 300 }),
        runId,
        await log.bumpEpoch(runId),
        new AbortController().signal,
      ),
      "paused",
    );
    assert.ok(Date.now() - t0 >= 300);
    assert.deepEqual((await types(runId)).slice(-3), [
      "approval.requested",
      "run.paused",
      "artifact.emitted",
    ]);
    assert.equal(await sandbox.find(runId), undefined);

    // Another worker gets the run while the approval still waits (as after its holder
    // died): it appends nothing until the approval is resolved, then resumes.
    const before = (await types(runId)).length;
    script = [say("Removed.")];
    const driving = driveRun(
      deps({ approvalHoldMs: 30_000 }),
      runId,
      await log.bumpEpoch(runId),
      new AbortController().signal,
    );
    await new Promise((r) => setTimeout(r, 500));
    assert.equal((await types(runId)).length, before, "still paused, nothing appended");
    const req = await waitFor(runId, "approvalRequested");
    await approveInLog(log, { runId, sessionId }, req.approvalId);
    assert.equal(await driving, "completed");
    const t = await types(runId);
    assert.deepEqual(t.slice(before, before + 2), ["approval.resolved", "run.resumed"]);
  });

  it("a worker stopping (or losing its lease) ends the hold at once: the run pauses for real", async () => {
    const { runId } = await newRun("Remove hello.txt");
    script = [call("c1", "process.run", { command: "rm -f hello.txt" })];
    const stop = new AbortController();
    // A hold far past the test's own timeout: only the stop can end it in time.
    const driving = driveRun(
      deps({ approvalHoldMs: 3_600_000 }),
      runId,
      await log.bumpEpoch(runId),
      stop.signal,
    );
    await waitFor(runId, "runPaused");
    assert.equal((await types(runId)).at(-1), "run.paused", "held: nothing after the pause yet");
    stop.abort();
    assert.equal(await driving, "paused");
    assert.equal((await types(runId)).at(-1), "artifact.emitted");
    assert.equal(await sandbox.find(runId), undefined);
  });

  it("a run cancelled while held ends cancelled and its container goes", async () => {
    const { runId, sessionId } = await newRun("Remove hello.txt");
    script = [call("c1", "process.run", { command: "rm -f hello.txt" })];
    const driving = driveRun(
      deps({ approvalHoldMs: 30_000 }),
      runId,
      await log.bumpEpoch(runId),
      new AbortController().signal,
    );
    await waitFor(runId, "runPaused");
    // CancelRun on a paused run appends run.cancelled itself (compare-and-append).
    const head = (await log.read(runId, 0)).length;
    await log.append({
      runId,
      sessionId,
      expectedSeq: head,
      payload: {
        case: "runCancelled",
        value: create(RunCancelledSchema, { reason: "no", cancelledBy: "alice" }),
      },
    });
    assert.equal(await driving, "cancelled");
    assert.equal((await types(runId)).at(-1), "run.cancelled");
    assert.equal(await sandbox.find(runId), undefined);
  });

  it("answers a call a dead worker left open with 'interrupted' and carries on", async () => {
    const { runId, sessionId } = await newRun();
    const dead = await log.bumpEpoch(runId);
    await log.append({
      runId,
      sessionId,
      fence: dead,
      payload: {
        case: "toolCall",
        value: create(ToolCallSchema, {
          callId: "lost",
          tool: "process.run",
          inputJson: '{"command":"true"}',
        }),
      },
    });
    script = [say("Nothing left to do.")];
    const epoch = await log.bumpEpoch(runId);
    assert.equal(await driveRun(deps(), runId, epoch, new AbortController().signal), "completed");
    const res = (await log.read(runId, 0))
      .map((e) => e.event)
      .find((e) => e.payload.case === "toolResult" && e.payload.value.callId === "lost");
    assert.equal(
      res?.payload.case === "toolResult" && res.payload.value.error?.code,
      "interrupted",
    );
    await assert.rejects(
      log.append({
        runId,
        sessionId,
        fence: dead,
        payload: { case: "toolCall", value: create(ToolCallSchema, { callId: "late" }) },
      }),
      // The run ended: the log refuses anything after its terminal event, stale or not.
      (err) => isAgentdError(err, "EENDED"),
    );
  });

  it("a cancel kills the running tool and removes the container", async () => {
    const { runId, sessionId } = await newRun();
    // A command far longer than the test's own timeout: only the cancel can end it in time.
    script = [call("c1", "process.run", { command: "sleep 3600" })];
    const driving = driveRun(
      deps(),
      runId,
      await log.bumpEpoch(runId),
      new AbortController().signal,
    );
    await waitFor(runId, "toolCall");
    await new Promise((r) => setTimeout(r, 300));
    await log.append({
      runId,
      sessionId,
      payload: {
        case: "runCancelRequested",
        value: create(RunCancelRequestedSchema, { reason: "stop", requestedBy: "alice" }),
      },
    });
    assert.equal(await driving, "cancelled");
    // In order: the request, the running call killed (its result says so), the run ended.
    assert.deepEqual((await types(runId)).slice(-3), [
      "run.cancel_requested",
      "tool.result",
      "run.cancelled",
    ]);
    const result = (await log.read(runId, 0)).map((e) => e.event.payload).at(-2);
    assert.ok(result?.case === "toolResult");
    assert.equal(result.value.callId, "c1");
    assert.equal(result.value.error?.code, "cancelled");
    assert.equal(await sandbox.find(runId), undefined);
  });

  it("loads the workspace's skills and memory file into the system prompt; an unknown named skill fails the run", async () => {
    const tar = await packWorkspace([
      {
        path: "AGENTS.md",
        type: "file",
        mode: 0o644,
        data: Buffer.from("Always run the tests with npm test.\n"),
      },
      {
        path: ".agent/skills/house-style/SKILL.md",
        type: "file",
        mode: 0o644,
        data: Buffer.from(
          "---\nname: house-style\ndescription: How this repository writes code.\nversion: 1.0.0\ntriggers:\n  - greeting\n---\nUse tabs, never spaces.\n",
        ),
      },
    ]);
    const info = await artifacts.put(tar);
    const runId = ulid();
    await log.append({
      runId,
      sessionId: "s",
      tenantId: "acme",
      payload: {
        case: "runQueued",
        value: create(RunQueuedSchema, {
          tenantId: "acme",
          prompt: "Fix the greeting",
          workspaceDigest: info.digest,
        }),
      },
    });
    script = [say("ok")];
    const before = stub.requests.length;
    assert.equal(
      await driveRun(deps(), runId, await log.bumpEpoch(runId), new AbortController().signal),
      "completed",
    );
    const system = JSON.stringify(stub.requests[before]?.body.messages[0]);
    assert.match(system, /Always run the tests with npm test/);
    assert.match(system, /Use tabs, never spaces/);

    const bad = ulid();
    await log.append({
      runId: bad,
      sessionId: "s",
      tenantId: "acme",
      payload: {
        case: "runQueued",
        value: create(RunQueuedSchema, {
          tenantId: "acme",
          prompt: "x",
          skills: ["no-such-skill"],
        }),
      },
    });
    assert.equal(
      await driveRun(deps(), bad, await log.bumpEpoch(bad), new AbortController().signal),
      "failed",
    );
    const f = (await log.read(bad, 0)).at(-1)?.event.payload;
    assert.equal(f?.case === "runFailed" && f.value.error?.code, "ESKILL_NOT_FOUND");
    assert.equal(await sandbox.find(bad), undefined);
  });

  it("fails with typed reasons: step limit, a looping model, an unreachable model", async () => {
    const a = await newRun();
    script = [
      call("c1", "repo.read", { path: "hello.txt" }),
      call("c2", "repo.read", { path: "hello.txt" }),
    ];
    assert.equal(
      await driveRun(
        deps({ limits: { ...DEFAULT_RUN_LIMITS, maxSteps: 1 } }),
        a.runId,
        await log.bumpEpoch(a.runId),
        new AbortController().signal,
      ),
      "failed",
    );
    const fa = (await log.read(a.runId, 0)).at(-1)?.event.payload;
    assert.equal(fa?.case === "runFailed" && fa.value.error?.code, "ELIMIT_STEPS");

    const b = await newRun();
    script = [1, 2, 3].map((i) => call(`l${i}`, "repo.read", { path: "missing.txt" }));
    assert.equal(
      await driveRun(deps(), b.runId, await log.bumpEpoch(b.runId), new AbortController().signal),
      "failed",
    );
    const fb = (await log.read(b.runId, 0)).at(-1)?.event.payload;
    assert.equal(fb?.case === "runFailed" && fb.value.error?.code, "ELOOP");

    const c = await newRun();
    const closed = "http://127.0.0.1:9/v1";
    assert.equal(
      await driveRun(
        deps({}, closed),
        c.runId,
        await log.bumpEpoch(c.runId),
        new AbortController().signal,
      ),
      "failed",
    );
    const fc = (await log.read(c.runId, 0)).at(-1)?.event.payload;
    assert.equal(fc?.case === "runFailed" && fc.value.error?.code, "EMODEL_UNAVAILABLE");
    for (const r of [a, b, c]) assert.equal(await sandbox.find(r.runId), undefined);
  });
});
