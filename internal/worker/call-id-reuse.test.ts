/**
 * A model that reuses a call id: the pure split (call-id-reuse.ts), then a real drive (the
 * embedded event log, a real container, the kernel, the OpenAI HTTP path against a scripted
 * server) where the model reuses the id of a call waiting for approval in the same step, and
 * again in a later step: the approved call runs exactly once, each reuse is answered as a
 * malformed call under a fresh id, and the model is told. Ids agentd makes itself
 * (`setup_`, `reused_`, `renamed_`) are never left to a model's call, and the setup step's
 * next id is one no call of the log holds.
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
import { type Event, EventSchema, ToolCallSchema } from "../gen/agentd/v1/events_pb.js";
import { createKernel } from "../kernel/kernel.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import type { Sandbox } from "../sandbox/port.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { testSandbox } from "../testing/docker.ts";
import {
  type OpenAiStub,
  type StubReply,
  startOpenAiStub,
  toolCallsReply,
} from "../testing/openai-stub.ts";
import {
  approveInLog,
  callReply,
  queueRun,
  sayReply,
  testImagePolicy,
} from "../testing/worker-fixtures.ts";
import { SETUP_TOOL } from "../tools/setup-run.ts";
import { separateReusedIds, usedCallIds } from "./call-id-reuse.ts";
import { setupCallId } from "./drive-setup.ts";
import { DEFAULT_RUN_LIMITS, type DriverDeps, driveRun } from "./run-driver.ts";

describe("separateReusedIds", () => {
  it("a call under a used id (log or same step) is malformed under a fresh, unique id", () => {
    const used = new Set(["c1", "reused_x"]);
    const r = separateReusedIds(
      used,
      [
        { callId: "c1", tool: "repo.read", input: { path: "a" } },
        { callId: "c2", tool: "repo.read", input: { path: "b" } },
        { callId: "c2", tool: "repo.read", input: { path: "c" } },
      ],
      [{ callId: "c2", tool: "nope", input: {}, error: { code: "EUNKNOWN_TOOL", message: "x" } }],
    );
    assert.deepEqual(
      r.calls.map((c) => c.callId),
      ["c2"],
    );
    assert.equal(r.calls[0]?.input && (r.calls[0].input as { path: string }).path, "b");
    assert.equal(r.bad.length, 3);
    const ids = r.bad.map((b) => b.callId);
    assert.equal(new Set([...ids, "c1", "c2"]).size, 5, `fresh and distinct: ${ids}`);
    for (const id of ids) assert.match(id, /^reused_[0-9a-f]{16}$/);
    assert.match(r.bad[0]?.error.message ?? "", /the id c1 is already used/);
    assert.match(r.bad[1]?.error.message ?? "", /the id c2 is already used/);
    assert.equal(r.bad[2]?.error.code, "EUNKNOWN_TOOL", "a malformed call keeps its own error");
    for (const id of ids) assert.ok(used.has(id), "fresh ids are marked used");
  });
});

const callEvent = (callId: string, tool: string): Event =>
  create(EventSchema, {
    payload: { case: "toolCall", value: create(ToolCallSchema, { callId, tool, inputJson: "{}" }) },
  });

describe("ids agentd keeps for its own calls", () => {
  it("a model call under setup_2 goes on under a fresh renamed_ id; the next setup call is setup_2", () => {
    const log = [callEvent("setup_1", SETUP_TOOL)];
    const { calls, bad } = separateReusedIds(
      usedCallIds(log),
      [{ callId: "setup_2", tool: "process.run", input: {} }],
      [],
    );
    assert.equal(bad.length, 0, "the call is not refused: it runs");
    assert.equal(calls.length, 1);
    const id = calls[0]?.callId ?? "";
    assert.match(id, /^renamed_[0-9a-f]{16}$/);
    log.push(callEvent(id, "process.run"));
    assert.equal(setupCallId(log), "setup_2");
    assert.equal(usedCallIds(log).has(setupCallId(log)), false);
  });

  it("every reserved prefix is renamed, in calls and malformed calls; one reserved id twice is a reuse", () => {
    const used = new Set<string>();
    const r = separateReusedIds(
      used,
      [
        { callId: "reused_0123456789abcdef", tool: "repo.read", input: {} },
        { callId: "renamed_x", tool: "repo.read", input: {} },
        { callId: "setup_9", tool: "repo.read", input: {} },
        { callId: "setup_9", tool: "repo.read", input: { again: true } },
        { callId: "call_ok", tool: "repo.read", input: {} },
      ],
      [
        {
          callId: "setup_1",
          tool: "nope",
          input: {},
          error: { code: "EUNKNOWN_TOOL", message: "x" },
        },
      ],
    );
    const runIds = r.calls.map((c) => c.callId);
    assert.equal(runIds.length, 4);
    assert.equal(runIds[3], "call_ok", "an id of no reserved prefix is kept");
    for (const id of runIds.slice(0, 3)) assert.match(id, /^renamed_[0-9a-f]{16}$/);
    assert.equal(new Set(runIds).size, 4);
    assert.equal(r.bad.length, 2);
    assert.match(r.bad[0]?.callId ?? "", /^reused_[0-9a-f]{16}$/);
    assert.match(r.bad[0]?.error.message ?? "", /the id setup_9 \(recorded as renamed_/);
    assert.match(r.bad[1]?.callId ?? "", /^renamed_[0-9a-f]{16}$/);
    assert.equal(r.bad[1]?.error.code, "EUNKNOWN_TOOL");
    for (const id of [...runIds, ...r.bad.map((b) => b.callId)]) {
      assert.ok(!id.startsWith("setup_"), `${id} is not a setup id`);
      assert.ok(used.has(id));
    }
  });

  it("an old log where a model call holds setup_2: the next setup call takes the next free id", () => {
    const log = [callEvent("setup_1", SETUP_TOOL), callEvent("setup_2", "process.run")];
    assert.equal(setupCallId(log), "setup_3");
    log.push(callEvent("setup_3", SETUP_TOOL));
    assert.equal(setupCallId(log), "setup_4", "setup calls counted: 2, so setup_3 is next, then 4");
  });
});

let dir: string;
let log: FileEventLog;
let artifacts: FsArtifactStore;
let sandbox: Sandbox;
let cleanupBoxes: () => Promise<void>;
let stub: OpenAiStub;
let script: StubReply[] = [];
let policy: Policy;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-reuse-"));
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

function deps(): DriverDeps {
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
    workerId: "worker-a",
    approvalHoldMs: 120_000,
  };
}

const events = async (runId: string): Promise<Event[]> =>
  (await log.read(runId, 0)).map((e) => e.event);

async function waitFor(runId: string, what: string, pred: (e: Event) => boolean): Promise<void> {
  const deadline = Date.now() + 90_000;
  while (!(await events(runId)).some(pred)) {
    if (Date.now() > deadline) throw new Error(`no ${what} in run ${runId} after 90 s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function patchLines(evs: Event[]): Promise<string[]> {
  const done = evs.find((e) => e.payload.case === "runCompleted")?.payload;
  assert.ok(done?.case === "runCompleted" && done.value.patchDigest !== "", "a patch");
  const parts: Uint8Array[] = [];
  for await (const c of artifacts.read(done.value.patchDigest)) parts.push(c);
  return Buffer.concat(parts)
    .toString("utf8")
    .split("\n")
    .filter((l) => l.startsWith("+") && !l.startsWith("+++"));
}

describe("a drive where the model reuses call ids", () => {
  it("the approved call runs exactly once; each reuse is answered malformed; the model is told", {
    timeout: 240_000,
  }, async () => {
    const tar = await packWorkspace([
      { path: "config.yaml", type: "file", mode: 0o644, data: Buffer.from("first: 1\n") },
    ]);
    const info = await artifacts.put(tar);
    const run = await queueRun(log, {
      prompt: "Append a line to config.yaml",
      workspaceDigest: info.digest,
      workspaceSizeBytes: info.size,
    });
    const append = { command: "echo added: 2 >> config.yaml && echo appended" };
    script = [
      // Step 1: the call that needs a person, and a second call under its id (an unknown
      // tool, answered before the first is decided).
      {
        chunks: toolCallsReply([
          { id: "c1", name: "process_run", arguments: JSON.stringify(append) },
          { id: "c1", name: "no_such_tool", arguments: "{}" },
        ]),
      },
      // Step 2, after the approved call ran: its id again, for the same write.
      callReply("c1", "process.run", append),
      sayReply("Done."),
    ];
    const outcome = driveRun(deps(), run.runId, await log.bumpEpoch(run.runId), {
      stop: new AbortController().signal,
    }).catch((err: Error) => err);
    await waitFor(run.runId, "approval.requested", (e) => e.payload.case === "approvalRequested");
    const req = (await events(run.runId)).find((e) => e.payload.case === "approvalRequested");
    assert.ok(req?.payload.case === "approvalRequested");
    assert.equal(req.payload.value.callId, "c1", "the real call keeps its id");
    await approveInLog(log, run, req.payload.value.approvalId);
    assert.equal(await outcome, "completed");

    const evs = await events(run.runId);
    const calls = evs.flatMap((e) => (e.payload.case === "toolCall" ? [e.payload.value] : []));
    const ids = calls.map((c) => c.callId);
    assert.equal(new Set(ids).size, ids.length, `every tool.call id is unique: ${ids}`);
    assert.equal(ids.filter((id) => id === "c1").length, 1);
    const results = evs.flatMap((e) => (e.payload.case === "toolResult" ? [e.payload.value] : []));
    const c1 = results.filter((r) => r.callId === "c1");
    assert.equal(c1.length, 1);
    assert.equal(c1[0]?.ok, true, "the approved call ran");
    const started = evs.filter((e) => e.payload.case === "toolStarted");
    assert.equal(started.length, 1, "only the approved call ran");
    assert.equal(evs.filter((e) => e.payload.case === "approvalRequested").length, 1);
    // The second call of step 1 (the SDK may rename a duplicate id within one response) and
    // step 2's reuse: both answered, neither ran.
    const others = results.filter((r) => r.callId !== "c1");
    assert.equal(others.length, 2, "both reuses answered");
    for (const r of others) assert.equal(r.ok, false);
    assert.ok(others.some((r) => /unknown tool/.test(r.error?.message ?? "")));
    const reused = others.find((r) => /the id c1 is already used/.test(r.error?.message ?? ""));
    assert.match(reused?.callId ?? "", /^reused_[0-9a-f]{16}$/, "answered under a fresh id");
    assert.deepEqual(await patchLines(evs), ["+added: 2"], "the line was appended once");
    const last = JSON.stringify(stub.requests.at(-1)?.body ?? {});
    assert.match(last, /is already used by an earlier call of this run/);
  });
});

describe("a drive where the model uses agentd's own call ids", () => {
  it("its calls under setup_1 and setup_2 run under renamed_ ids; only the setup step holds setup_", {
    timeout: 240_000,
  }, async () => {
    const run = await queueRun(log, { prompt: "Say hello" });
    script = [
      {
        chunks: toolCallsReply([
          {
            id: "setup_1",
            name: "process_run",
            arguments: JSON.stringify({ command: "echo one" }),
          },
          {
            id: "setup_2",
            name: "process_run",
            arguments: JSON.stringify({ command: "echo two" }),
          },
        ]),
      },
      sayReply("Done."),
    ];
    const saved = policy;
    policy = { ...policy, tools: { ...policy.tools, setup: "echo set-up" } };
    let outcome: unknown;
    try {
      outcome = await driveRun(deps(), run.runId, await log.bumpEpoch(run.runId), {
        stop: new AbortController().signal,
      });
    } finally {
      policy = saved;
    }
    assert.equal(outcome, "completed");
    const evs = await events(run.runId);
    const calls = evs.flatMap((e) => (e.payload.case === "toolCall" ? [e.payload.value] : []));
    const ids = calls.map((c) => c.callId);
    assert.equal(new Set(ids).size, ids.length, `every tool.call id is unique: ${ids}`);
    assert.deepEqual(
      calls.filter((c) => c.callId.startsWith("setup_")).map((c) => [c.callId, c.tool]),
      [["setup_1", "setup.run"]],
      "only the setup step's call holds a setup_ id",
    );
    const model = calls.filter((c) => c.tool === "process.run");
    assert.equal(model.length, 2);
    for (const c of model) assert.match(c.callId, /^renamed_[0-9a-f]{16}$/);
    const results = evs.flatMap((e) => (e.payload.case === "toolResult" ? [e.payload.value] : []));
    for (const c of model) {
      const r = results.filter((x) => x.callId === c.callId);
      assert.equal(r.length, 1);
      assert.equal(r[0]?.ok, true, `the call ${c.callId} ran`);
    }
    const last = JSON.stringify(stub.requests.at(-1)?.body ?? {});
    for (const c of model) assert.ok(last.includes(c.callId), "the model sees the renamed ids");
  });
});
