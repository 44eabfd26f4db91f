/**
 * Budgets that bind, through real drives: each model request carries the maximum output
 * left of the run's token and cost budget after its whole prompt (read from the request
 * body the OpenAI-compatible stub recorded; the stub charges ~4 characters of the body a
 * token, as a provider charges the prompt it got), a step whose prompt would pass what is
 * left — a large tool output in it — is never asked, a request is never without a maximum
 * (the ceiling above it), a provider that reports no usage is counted by estimate, a tool
 * call running when the wall budget runs out is killed in its real container (its result
 * says ELIMIT_TIME, the line it would print after its sleep never comes) and the run ends
 * ELIMIT_TIME — the setup step's call as any other, and a second drive (a takeover) continues the step count and the token count
 * of the first. Real parts: the embedded log, Docker, the kernel, the AI SDK.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import type { Event } from "../gen/agentd/v1/events_pb.js";
import { RunState } from "../gen/agentd/v1/run_service_pb.js";
import { readPolicyFile } from "../kernel/policy-loader.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import { projectRun } from "../projections/run-projection.ts";
import type { Sandbox } from "../sandbox/port.ts";
import { startChargingStub } from "../testing/charging-stub.ts";
import { sandboxImage, testSandbox } from "../testing/docker.ts";
import { stubDriverDeps } from "../testing/driver-deps.ts";
import { type OpenAiStub, type StubReply, textReply } from "../testing/openai-stub.ts";
import { approveInLog, callReply, queueRun, sayReply } from "../testing/worker-fixtures.ts";
import { DEFAULT_RUN_LIMITS, type DriverDeps, driveRun } from "./run-driver.ts";

let dir: string;
let log: FileEventLog;
let stub: OpenAiStub;
let script: StubReply[] = [];
/** The prompt tokens the stub charged each request, in the order of stub.requests. */
const charged: number[] = [];
let sandbox: Sandbox;
let policy: Policy;
let artifacts: FsArtifactStore;
let cleanup: () => Promise<void>;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-budget-binds-"));
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

const echoes = (n: number, from = 0): StubReply[] =>
  Array.from({ length: n }, (_, i) =>
    callReply(`r${from + i}`, "process.run", { command: `echo ${from + i}` }),
  );

/** The maximum output a recorded request asked for (the provider's field for it). */
const maxOut = (body: { max_tokens?: number; max_completion_tokens?: number }) =>
  body.max_tokens ?? body.max_completion_tokens;

const eventsOf = async (runId: string): Promise<Event[]> =>
  (await log.read(runId, 0)).map((e) => e.event);

async function drive(
  budget: Parameters<typeof queueRun>[1]["budget"],
  calls: StubReply[],
  over: Partial<DriverDeps> = {},
) {
  const run = await queueRun(log, { prompt: "spend", budget });
  script = [...calls, sayReply("done")];
  const first = stub.requests.length;
  const deps = stubDriverDeps({ log, policy, sandbox, artifacts, baseURL: stub.baseURL }, over);
  const outcome = await driveRun(
    deps,
    run.runId,
    await log.bumpEpoch(run.runId),
    new AbortController().signal,
  );
  const events = await eventsOf(run.runId);
  return {
    outcome,
    events,
    run: projectRun(run.runId, events),
    requests: stub.requests.slice(first).map((r) => r.body),
    charged: charged.slice(first),
  };
}

const usedOf = (run: { usage?: { inputTokens: bigint; outputTokens: bigint } }): number =>
  Number(run.usage?.inputTokens ?? 0n) + Number(run.usage?.outputTokens ?? 0n);

/** What the stub charged the first request of a run: the system prompt, the tools, the task. */
async function firstPrompt(): Promise<number> {
  const { charged: c } = await drive(undefined, []);
  assert.ok((c[0] ?? 0) > 500, `the tools alone are hundreds of tokens (charged ${c[0]})`);
  return c[0] as number;
}

describe("budgets that bind", { timeout: 240_000 }, () => {
  it("each request leaves room for its whole prompt, the first one's too; a step whose prompt would pass what is left is not asked", async () => {
    const p0 = await firstPrompt();
    // Room for two steps (8 output tokens each, the second prompt a little larger), not three.
    const budget = 2 * p0 + 300;
    const { run, requests, charged: c } = await drive({ maxTokens: BigInt(budget) }, echoes(5));
    assert.equal(requests.length, 2, "two steps fit; the third is not asked");
    const [first, second] = requests.map(maxOut) as [number, number];
    assert.ok(
      first <= budget - 0.8 * p0,
      `the first prompt counts: the first request asked for ${first} of ${budget} with a ${p0}-token prompt`,
    );
    // After the first step the estimate is scaled to what the provider charged for it.
    const usedBefore = (c[0] as number) + 8;
    assert.ok(
      second + (c[1] as number) + usedBefore <= budget,
      `the second request (max ${second}, charged ${c[1]}) fits what was left (${budget - usedBefore})`,
    );
    assert.equal(run.error?.code, "ELIMIT_TOKENS");
    assert.match(
      run.error?.message ?? "",
      /next prompt is estimated at \d+.*the model was not asked/,
    );
    assert.ok(usedOf(run) <= budget, `the run stayed inside its ${budget} tokens (${usedOf(run)})`);
  });

  it("a large tool output makes the next prompt pass the token budget: that step is not asked", async () => {
    const p0 = await firstPrompt();
    // Room for the first step, not for a prompt carrying 16 KiB of tool output (~4,000 tokens).
    const budget = p0 + 1_500;
    const big = callReply("big", "process.run", {
      command: "head -c 60000 /dev/zero | tr '\\0' a",
    });
    const { run, requests } = await drive({ maxTokens: BigInt(budget) }, [big]);
    assert.equal(requests.length, 1, "the step after the large output was not asked");
    assert.equal(run.error?.code, "ELIMIT_TOKENS");
    assert.match(run.error?.message ?? "", /the model was not asked/);
    assert.ok(usedOf(run) <= budget, `a ${budget}-token budget ended at ${usedOf(run)} tokens`);
  });

  it("the cost budget caps the request at the output tokens its remainder buys after the prompt", async () => {
    const p0 = await firstPrompt();
    // gpt-4o-mini: input 0.15, output 0.6 micro-USD a token; 1,000 micro-USD of budget.
    const { requests } = await drive({ maxCostMicros: 1_000n }, echoes(1));
    const got = maxOut(requests[0]) as number;
    const byCost = (promptTokens: number) =>
      Math.floor(((1_000 - promptTokens * 0.15) * 1_000_000) / 600_000);
    assert.ok(
      got <= byCost(0.8 * p0) && got >= byCost(1.5 * p0),
      `the prompt's cost is taken off first: asked for ${got}, the whole budget buys ${byCost(0)}, the prompt costs ~${p0 * 0.15}`,
    );
  });

  it("a budget above the model's output ceiling sends the ceiling, never no maximum", async () => {
    const { outcome, requests } = await drive(undefined, echoes(1));
    assert.equal(outcome, "completed");
    assert.equal(requests.length, 2);
    for (const body of requests) assert.equal(maxOut(body), 16_384);
    // A budget 40,000 tokens past the prompt (a model's own limit can be 32k to 128k).
    const p0 = await firstPrompt();
    const left = 40_000;
    const big = await drive({ maxTokens: BigInt(p0 + left) }, []);
    const max = maxOut(big.requests[0] ?? {});
    assert.ok(max !== undefined && max <= left, `asked for ${max} with ${left} left`);
  });

  it("a provider that reports no usage: each step counts by estimate and the token budget binds", async () => {
    // Replies without the usage chunk (no stream_options.include_usage honoured).
    const noUsage = (r: StubReply): StubReply =>
      "chunks" in r
        ? { chunks: r.chunks.filter((c) => typeof c === "string" || !("usage" in c)) }
        : r;
    const budget = 6_000;
    const { run, requests } = await drive({ maxTokens: BigInt(budget) }, echoes(20).map(noUsage));
    const sent = requests.reduce<number>((n, b) => n + Math.ceil(JSON.stringify(b).length / 4), 0);
    assert.ok(
      sent <= 2 * budget,
      `${requests.length} prompts of ~${sent} tokens under a ${budget}-token budget; the run ended ${run.error?.code ?? "without error"}`,
    );
    assert.equal(run.error?.code, "ELIMIT_TOKENS");
    assert.ok(usedOf(run) > 0, "the estimate is counted");
  });

  it("a call still running when the wall budget runs out is killed; the run ends ELIMIT_TIME", async () => {
    const slow = callReply("slow", "process.run", {
      command: "sleep 120; printf 'after-%s' sleep",
      timeoutMs: 600_000,
    });
    const { run, events } = await drive({ maxWallMs: 10_000n }, [slow]);
    const result = events.flatMap((e) =>
      e.payload.case === "toolResult" && e.payload.value.callId === "slow" ? [e.payload.value] : [],
    );
    assert.equal(result.length, 1, `the call has its one result: ${JSON.stringify(run.error)}`);
    assert.equal(result[0]?.ok, false);
    assert.equal(result[0]?.error?.code, "ELIMIT_TIME");
    assert.match(result[0]?.error?.message ?? "", /wall-clock budget/);
    assert.equal(
      events.some(
        (e) =>
          (e.payload.case === "toolOutput" || e.payload.case === "toolResult") &&
          JSON.stringify(e.payload.value, (_k, v) =>
            typeof v === "bigint" ? String(v) : v,
          ).includes("after-sleep"),
      ),
      false,
      "the line printed after the sleep never came: the call was killed",
    );
    assert.equal(run.state, RunState.FAILED);
    assert.equal(run.error?.code, "ELIMIT_TIME");
    assert.match(run.error?.message ?? "", /the run's budget: the run used its 10000 ms/);
  });

  it("the setup step still running when the wall budget runs out is killed; the run ends ELIMIT_TIME", async () => {
    const run = await queueRun(log, { prompt: "spend", budget: { maxWallMs: 10_000n } });
    script = [sayReply("done")];
    const asked = stub.requests.length;
    const withSetup: Policy = {
      ...policy,
      tools: { ...policy.tools, setup: "sleep 120; printf 'setup-%s' finished" },
    };
    const deps = stubDriverDeps({
      log,
      policy: withSetup,
      sandbox,
      artifacts,
      baseURL: stub.baseURL,
    });
    const outcome = await driveRun(
      deps,
      run.runId,
      await log.bumpEpoch(run.runId),
      new AbortController().signal,
    );
    const events = await eventsOf(run.runId);
    const setupIds = events.flatMap((e) =>
      e.payload.case === "toolCall" && e.payload.value.tool === "setup.run"
        ? [e.payload.value.callId]
        : [],
    );
    assert.deepEqual(setupIds, ["setup_1"], "the setup ran as one call");
    const result = events.flatMap((e) =>
      e.payload.case === "toolResult" && e.payload.value.callId === "setup_1"
        ? [e.payload.value]
        : [],
    );
    assert.equal(result.length, 1, "the setup call has its one result");
    assert.equal(result[0]?.error?.code, "ELIMIT_TIME");
    assert.equal(
      events.some((e) =>
        JSON.stringify(e.payload.value, (_k, v) =>
          typeof v === "bigint" ? String(v) : v,
        ).includes("setup-finished"),
      ),
      false,
      "the line printed after the sleep never came: the setup was killed",
    );
    assert.equal(outcome, "failed");
    assert.equal(projectRun(run.runId, events).error?.code, "ELIMIT_TIME");
    assert.equal(stub.requests.length, asked, "the model was never asked");
  });

  it("a model step still streaming when the wall budget runs out is cut; the run ends ELIMIT_TIME", async () => {
    // 120 pieces half a second apart: a minute of answer against a 5 s budget.
    const slow: StubReply = { chunks: textReply(Array(120).fill("word ")), chunkDelayMs: 500 };
    const run = await queueRun(log, { prompt: "talk", budget: { maxWallMs: 5_000n } });
    script = [slow];
    const deps = stubDriverDeps({ log, policy, sandbox, artifacts, baseURL: stub.baseURL });
    const outcome = await driveRun(
      deps,
      run.runId,
      await log.bumpEpoch(run.runId),
      new AbortController().signal,
    );
    const events = await eventsOf(run.runId);
    assert.equal(outcome, "failed");
    assert.equal(projectRun(run.runId, events).error?.code, "ELIMIT_TIME");
    assert.equal(
      events.some((e) => e.payload.case === "outputMessage"),
      false,
      "the answer never finished: the step was cut",
    );
  });

  it("a takeover continues the step and token counts of the drive before it", async () => {
    const budget = 1_000_000;
    const run = await queueRun(log, { prompt: "spend", budget: { maxTokens: BigInt(budget) } });
    // Step 2's call sleeps: the worker is told to stop while it runs, and releases the run
    // at the next step boundary — after exactly two steps.
    script = [
      ...echoes(1),
      callReply("slow", "process.run", { command: "sleep 3; echo slept" }),
      ...echoes(3, 10),
    ];
    // Every maximum is sent (none is above this ceiling).
    const limits = { ...DEFAULT_RUN_LIMITS, maxSteps: 3, maxOutputTokensSent: 10 * budget };
    const deps = stubDriverDeps(
      { log, policy, sandbox, artifacts, baseURL: stub.baseURL },
      { limits },
    );
    const first = stub.requests.length;
    const stop = new AbortController();
    const driving = driveRun(deps, run.runId, await log.bumpEpoch(run.runId), stop.signal);
    for (let i = 0; ; i++) {
      const evs = await eventsOf(run.runId);
      if (evs.some((e) => e.payload.case === "toolCall" && e.payload.value.callId === "slow"))
        break;
      assert.ok(i < 2400, "waiting for the slow call to be in the log");
      await new Promise((r) => setTimeout(r, 50));
    }
    stop.abort();
    assert.equal(await driving, "released");
    const second = await driveRun(
      deps,
      run.runId,
      await log.bumpEpoch(run.runId),
      new AbortController().signal,
    );
    assert.equal(second, "failed");
    const events = await eventsOf(run.runId);
    const ended = projectRun(run.runId, events);
    assert.equal(
      ended.error?.code,
      "ELIMIT_STEPS",
      "the second drive had one step left, not three",
    );
    assert.deepEqual(
      events.flatMap((e) => (e.payload.case === "usageUpdated" ? [e.payload.value.steps] : [])),
      [1, 2, 3],
      "the step count goes on across the takeover",
    );
    const bodies = stub.requests.slice(first).map((r) => r.body);
    const c = charged.slice(first);
    assert.equal(bodies.length, 3);
    // The second drive's request (a fresh estimate scale) is still capped by what the first
    // drive used and by the last prompt the provider reported.
    const usedBefore = (c[0] as number) + 8 + (c[1] as number) + 8;
    assert.ok(
      (maxOut(bodies[2]) as number) <= budget - usedBefore - (c[1] as number),
      `the second drive's request (max ${maxOut(bodies[2])}) is capped by the first drive's ${usedBefore} tokens`,
    );
  });

  it("a takeover continues the wall clock: time the first drive spent counts against the second's limit", async () => {
    const run = await queueRun(log, { prompt: "spend" });
    // The first drive's second call sleeps 3 s: by the time it ends, at least 3,000 ms of
    // the run's wall time have passed since its run.started, whatever the machine's load.
    script = [
      ...echoes(1),
      callReply("slow", "process.run", { command: "sleep 3" }),
      ...echoes(2, 20),
    ];
    const deps = stubDriverDeps({ log, policy, sandbox, artifacts, baseURL: stub.baseURL });
    const stop = new AbortController();
    const driving = driveRun(deps, run.runId, await log.bumpEpoch(run.runId), stop.signal);
    for (let i = 0; ; i++) {
      const evs = await eventsOf(run.runId);
      if (evs.some((e) => e.payload.case === "toolCall" && e.payload.value.callId === "slow"))
        break;
      assert.ok(i < 2400, "waiting for the slow call to be in the log");
      await new Promise((r) => setTimeout(r, 50));
    }
    stop.abort();
    assert.equal(await driving, "released");
    const asked = stub.requests.length;
    // The next owner allows 3,000 ms: the run has used them already, in the drive before.
    const limits = { ...DEFAULT_RUN_LIMITS, maxWallMs: 3_000 };
    const next = stubDriverDeps(
      { log, policy, sandbox, artifacts, baseURL: stub.baseURL },
      { limits },
    );
    const outcome = await driveRun(
      next,
      run.runId,
      await log.bumpEpoch(run.runId),
      new AbortController().signal,
    );
    assert.equal(outcome, "failed");
    const ended = projectRun(run.runId, await eventsOf(run.runId));
    assert.equal(ended.error?.code, "ELIMIT_TIME");
    assert.equal(stub.requests.length, asked, "the model was not asked again");
  });

  for (const where of ["held in place", "paused, then resumed by another drive"] as const)
    it(`time waiting for a person does not count against the wall budget (${where})`, async () => {
      const run = await queueRun(log, { prompt: "ask", budget: { maxWallMs: 8_000n } });
      script = [callReply("ask", "process.run", { command: "echo approved" }), sayReply("done")];
      const asking: Policy = {
        ...policy,
        capabilities: { ...policy.capabilities, "process.run": { approval: "always" } },
      };
      const deps = stubDriverDeps(
        { log, policy: asking, sandbox, artifacts, baseURL: stub.baseURL },
        { approvalHoldMs: where === "held in place" ? 120_000 : 0 },
      );
      const first = driveRun(
        deps,
        run.runId,
        await log.bumpEpoch(run.runId),
        new AbortController().signal,
      );
      let approvalId = "";
      for (let i = 0; approvalId === ""; i++) {
        const req = (await eventsOf(run.runId)).find((e) => e.payload.case === "approvalRequested");
        if (req?.payload.case === "approvalRequested") approvalId = req.payload.value.approvalId;
        assert.ok(i < 2400, "waiting for approval.requested");
        await new Promise((r) => setTimeout(r, 50));
      }
      // The person takes longer than the run's whole wall budget.
      await new Promise((r) => setTimeout(r, 9_000));
      await approveInLog(log, run, approvalId);
      let outcome = await first;
      if (where !== "held in place") {
        assert.equal(outcome, "paused");
        outcome = await driveRun(
          deps,
          run.runId,
          await log.bumpEpoch(run.runId),
          new AbortController().signal,
        );
      }
      const events = await eventsOf(run.runId);
      assert.equal(outcome, "completed", JSON.stringify(projectRun(run.runId, events).error));
      const result = events.find(
        (e) => e.payload.case === "toolResult" && e.payload.value.callId === "ask",
      );
      assert.ok(
        result?.payload.case === "toolResult" && result.payload.value.ok,
        "the approved call ran",
      );
    });
});
