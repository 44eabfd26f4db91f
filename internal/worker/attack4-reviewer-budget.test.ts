/**
 * Attack (#27 "Budgets that bind": "The model request carries a maximum derived from what
 * is left of the token and cost budget"; drive-usage.ts: "Must never ... ask the model for
 * more output than the budget has left"): under `approval: reviewer`, every call the agent
 * model makes is sent to the reviewer model (at the same endpoint, on the same account),
 * with a preview the agent model wrote (up to 32 KiB). That request has no maximum output
 * (reviewer/review-call.ts askModel: generateText without maxOutputTokens) and whatever
 * the provider reports for it is dropped (`res.usage` is never read): it counts toward
 * neither the run's token and cost budget nor the tenant's day. The preview is the agent
 * model's text, so it can ask the reviewer to write at length (docs/policy.md: a preview
 * "can talk the model into `allow`"); one step of many calls buys as many reviews.
 *
 * Here a run with a 6,000-token budget makes four `echo` calls; the scripted reviewer
 * allows each and, as a provider would, reports 20,000 tokens for each review. The run
 * completes having spent more than 80,000 tokens against its 6,000-token budget, and its
 * usage shows only the agent model's share.
 *
 * What must hold: the reviewer's request carries a maximum from what is left of the run's
 * budget, and its reported usage is counted in the run's usage, so the run ends
 * ELIMIT_TOKENS at the first check after it (as after a model step whose reported usage
 * passed the budget: what a provider reports after the fact cannot be refused, only
 * counted) instead of buying one review per call.
 *
 * Second test, the wall budget ("a tool call's timeout is cut to the run's remaining wall
 * time"): the reviewer is asked inside the call, under its own `reviewer.timeout` (30 s by
 * default, up to 5 min), and the run's wall budget never reaches it: review-call.ts
 * askModel aborts the request on its own timer only, not on the drive's call signal
 * (drive.ts armWallBudget). A run with a 1 s wall budget waits on a slow reviewer (3 s
 * here) and the reviewer's request is never cancelled when the budget runs out.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { MockLanguageModelV4 } from "ai/test";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { createKernel } from "../kernel/kernel.ts";
import { readPolicyFile } from "../kernel/policy-loader.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import { projectRun } from "../projections/run-projection.ts";
import type { Sandbox } from "../sandbox/port.ts";
import { startChargingStub } from "../testing/charging-stub.ts";
import { sandboxImage, testSandbox } from "../testing/docker.ts";
import { stubDriverDeps } from "../testing/driver-deps.ts";
import type { OpenAiStub, StubReply } from "../testing/openai-stub.ts";
import { verdictText } from "../testing/reviewer-model.ts";
import { callReply, queueRun, sayReply } from "../testing/worker-fixtures.ts";
import { driveRun } from "./run-driver.ts";

const REVIEW_TOKENS = 20_000;
/** Whether each slow reviewer request was cancelled before it answered. */
const slowCancelled: boolean[] = [];
const slowReviewer = new MockLanguageModelV4({
  modelId: "scripted-reviewer",
  doGenerate: (options) =>
    new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        slowCancelled.push(false);
        resolve({
          content: [{ type: "text", text: verdictText("allow", 1, "fine") }],
          finishReason: { unified: "stop", raw: "stop" },
          usage: {
            inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
            outputTokens: { total: 5, text: 5, reasoning: undefined },
          },
          warnings: [],
        });
      }, 3_000);
      options.abortSignal?.addEventListener("abort", () => {
        clearTimeout(t);
        slowCancelled.push(true);
        reject(options.abortSignal?.reason);
      });
    }),
});
const BUDGET = 6_000;

let dir: string;
let log: FileEventLog;
let stub: OpenAiStub;
let script: StubReply[] = [];
const charged: number[] = [];
let sandbox: Sandbox;
let policy: Policy;
let artifacts: FsArtifactStore;
let cleanup: () => Promise<void>;

/** Every reviewer request's maximum output (undefined: none sent). */
const reviewerMaxima: (number | undefined)[] = [];
const reviewer = new MockLanguageModelV4({
  modelId: "scripted-reviewer",
  doGenerate: async (options) => {
    reviewerMaxima.push(options.maxOutputTokens);
    return {
      content: [{ type: "text", text: verdictText("allow", 1, "fine") }],
      finishReason: { unified: "stop", raw: "stop" },
      usage: {
        inputTokens: {
          total: REVIEW_TOKENS - 1000,
          noCache: REVIEW_TOKENS - 1000,
          cacheRead: undefined,
          cacheWrite: undefined,
        },
        outputTokens: { total: 1000, text: 1000, reasoning: undefined },
      },
      warnings: [],
    };
  },
});

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-attack4-reviewer-budget-"));
  log = await openFileEventLog({ dir: join(dir, "log") });
  stub = await startChargingStub(() => script.shift(), charged);
  artifacts = new FsArtifactStore(join(dir, "artifacts"));
  const file = join(dir, "reviewer.yaml");
  writeFileSync(
    file,
    [
      "version: 1",
      `extends: ${join(import.meta.dirname, "..", "..", "policy.yaml")}`,
      "capabilities:",
      "  process.run: { approval: reviewer }",
      "reviewer:",
      "  model: scripted-reviewer",
      "  rubric: Harmless commands are fine.",
    ].join("\n"),
  );
  const loaded = readPolicyFile(file);
  assert.ok(loaded.ok, JSON.stringify(!loaded.ok && loaded.errors));
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

it("the reviewer's tokens count toward the run's budget, and its request carries a maximum", async () => {
  const run = await queueRun(log, { prompt: "spend", budget: { maxTokens: BigInt(BUDGET) } });
  script = [
    ...Array.from({ length: 4 }, (_, i) =>
      callReply(`r${i}`, "process.run", { command: `echo ${i}` }),
    ),
    sayReply("done"),
  ];
  const first = charged.length;
  const deps = stubDriverDeps(
    { log, policy, sandbox, artifacts, baseURL: stub.baseURL },
    {
      kernel: createKernel({
        log,
        policy: () => policy,
        secretProviders: [],
        artifacts,
        reviewerModel: (id) => (id === "scripted-reviewer" ? reviewer : undefined),
      }),
    },
  );
  await driveRun(deps, run.runId, await log.bumpEpoch(run.runId), new AbortController().signal);
  const events = (await log.read(run.runId, 0)).map((e) => e.event);
  const verdicts = events.filter((e) => e.payload.case === "reviewerVerdict").length;
  assert.ok(verdicts >= 1, "the reviewer was asked");
  const shown = projectRun(run.runId, events);
  const counted = Number(shown.usage?.inputTokens ?? 0n) + Number(shown.usage?.outputTokens ?? 0n);
  const agentCharged = charged.slice(first).reduce((a, b) => a + b, 0);
  const spent = agentCharged + verdicts * REVIEW_TOKENS;
  assert.equal(verdicts, 1, `one review, then the budget binds; ${verdicts} were asked`);
  assert.equal(shown.error?.code, "ELIMIT_TOKENS", `the run ended ${shown.state}`);
  assert.ok(counted >= spent - 100, `its usage shows ${counted} of the ${spent} tokens spent`);
  assert.deepEqual(
    reviewerMaxima.map((m) => m !== undefined),
    reviewerMaxima.map(() => true),
    `reviewer requests without a maximum output: ${JSON.stringify(reviewerMaxima)}`,
  );
});

it("the run's wall budget cuts a review short as it cuts a tool call", async () => {
  const run = await queueRun(log, { prompt: "spend", budget: { maxWallMs: 1_000n } });
  script = [callReply("w0", "process.run", { command: "echo 1" }), sayReply("done")];
  const deps = stubDriverDeps(
    { log, policy, sandbox, artifacts, baseURL: stub.baseURL },
    {
      kernel: createKernel({
        log,
        policy: () => policy,
        secretProviders: [],
        artifacts,
        reviewerModel: (id) => (id === "scripted-reviewer" ? slowReviewer : undefined),
      }),
    },
  );
  await driveRun(deps, run.runId, await log.bumpEpoch(run.runId), new AbortController().signal);
  const events = (await log.read(run.runId, 0)).map((e) => e.event);
  const shown = projectRun(run.runId, events);
  assert.equal(slowCancelled.length, 1, "the reviewer was asked once");
  assert.deepEqual(
    slowCancelled,
    [true],
    `the review ran to its end past the 1 s wall budget; the run ended ${shown.state} ${shown.error?.code ?? ""}`,
  );
});
