/**
 * Attack (#27 budgets; drive-tenant-day.ts: "after each model step, what the step used is
 * added to the tenant's day"; docs/policy.md "The reviewer spends the run's budget. A
 * review is a model request on the run's account"): the fix for attack4-reviewer-budget
 * counts a review's reported usage in the run's usage (drive-usage.ts reviewBudget.spent:
 * d.usage += u; recordUsage), but never in the tenant's day: addTenantDay is called only by
 * drive-step.ts, with the difference of the run's counts around the agent model's own
 * request (tokensBefore is read before askModel, the reviews run later in runCalls, and the
 * next step's tokensBefore already includes them). A tenant's tokensPerDay/costPerDayUsd
 * therefore never sees reviewer requests: one step of many `process.run` calls under
 * `approval: reviewer` buys as many reviews, each up to a 32 KiB preview of input, all
 * outside the tenant's daily limit (and reviewBudget.allowance checks no tenantDaySpent
 * either: a tenant whose day is spent still has its reviews sent).
 *
 * Here a run with no budget of its own makes four `echo` calls; the reviewer reports
 * 20,000 tokens per review. The run's usage shows them; the tenant's day does not.
 *
 * What must hold: whatever counts in the run's usage counts in the tenant's day (the same
 * model account pays for both), and a review is not sent for a tenant whose day is spent.
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
import { utcDay } from "../tenancy/day-usage.ts";
import { MemoryDayLedger } from "../tenancy/memory-day-usage.ts";
import { startChargingStub } from "../testing/charging-stub.ts";
import { sandboxImage, testSandbox } from "../testing/docker.ts";
import { stubDriverDeps } from "../testing/driver-deps.ts";
import type { OpenAiStub, StubReply } from "../testing/openai-stub.ts";
import { verdictText } from "../testing/reviewer-model.ts";
import { callReply, queueRun, sayReply } from "../testing/worker-fixtures.ts";
import { driveRun } from "./run-driver.ts";

const REVIEW_TOKENS = 20_000;

let dir: string;
let log: FileEventLog;
let stub: OpenAiStub;
let script: StubReply[] = [];
const charged: number[] = [];
let sandbox: Sandbox;
let policy: Policy;
let artifacts: FsArtifactStore;
let cleanup: () => Promise<void>;

const reviewer = new MockLanguageModelV4({
  modelId: "scripted-reviewer",
  doGenerate: async () => ({
    content: [{ type: "text", text: verdictText("allow", 1, "fine") }],
    finishReason: { unified: "stop", raw: "stop" },
    usage: {
      inputTokens: {
        total: REVIEW_TOKENS - 500,
        noCache: REVIEW_TOKENS - 500,
        cacheRead: undefined,
        cacheWrite: undefined,
      },
      outputTokens: { total: 500, text: 500, reasoning: undefined },
    },
    warnings: [],
  }),
});

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-attack5-reviewer-tenant-day-"));
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

it("a review's tokens are charged to the tenant's day, as the run's usage counts them", async () => {
  const run = await queueRun(log, { prompt: "spend" });
  const ledger = new MemoryDayLedger();
  // A limit far above what the test spends: the day is counted, nothing is refused.
  await ledger.setLimits(new Map([["acme", { tokensPerDay: 100_000_000 }]]));
  script = [
    ...Array.from({ length: 4 }, (_, i) =>
      callReply(`t${i}`, "process.run", { command: `echo ${i}` }),
    ),
    sayReply("done"),
  ];
  const deps = stubDriverDeps(
    { log, policy, sandbox, artifacts, baseURL: stub.baseURL },
    {
      tenantDay: ledger,
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
  const day = await ledger.useOf("acme", utcDay(Date.now()));
  assert.ok(counted >= verdicts * REVIEW_TOKENS, `the run's usage counts the reviews (${counted})`);
  assert.ok(
    day.tokens >= counted,
    `the tenant's day shows ${day.tokens} tokens; the run's usage ${counted} (${verdicts} reviews of ${REVIEW_TOKENS})`,
  );
});
