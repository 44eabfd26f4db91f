/**
 * Attack (#27 budgets; drive-step.ts countStep: "where it reported none (a provider that
 * sends no usage), as estimated from the request and the answer (4 bytes a token): a run's
 * token budget binds whatever the provider tells"; docs/policy.md "The reviewer spends the
 * run's budget ... so the run ends at its budget as after a model step"): a model step that
 * reports no usage is counted by estimate, but a review that reports none counts 0
 * (review-call.ts usageOf: "0 for what it did not"; reviewBudget.spent adds it as is). The
 * allowance a review checks is then never lowered by reviews: against an endpoint that
 * sends no usage (many OpenAI-compatible servers; the agent model's own steps are
 * estimated there for exactly that reason), every call under `approval: reviewer` sends a
 * prompt of up to a 32 KiB preview the agent model wrote, and none of it is counted.
 *
 * Here a run with a 60,000-token budget makes four calls, each an `echo` of a 6,000-
 * character argument (at least 2,000 tokens of prompt per review at the 3 characters a token
 * review-call.ts itself estimates); the reviewer allows each and reports no usage. Four
 * reviews are sent and the run completes with its usage showing only the agent's steps.
 *
 * What must hold: a review whose provider reports no usage is counted as estimated (its
 * prompt at the allowance's own estimate, its answer's length), as a step is, so the
 * budget binds reviews whatever the provider tells.
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

const BUDGET = 60_000;
const ARG = "x".repeat(6_000);

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
        total: undefined,
        noCache: undefined,
        cacheRead: undefined,
        cacheWrite: undefined,
      },
      outputTokens: { total: undefined, text: undefined, reasoning: undefined },
    },
    warnings: [],
  }),
});

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-attack5-reviewer-no-usage-"));
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

it("a review whose provider reports no usage is counted by estimate, as a step is", async () => {
  const run = await queueRun(log, { prompt: "spend", budget: { maxTokens: BigInt(BUDGET) } });
  script = [
    ...Array.from({ length: 4 }, (_, i) =>
      callReply(`n${i}`, "process.run", { command: `echo ${ARG} ${i}` }),
    ),
    sayReply("done"),
  ];
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
  const first = charged.length;
  await driveRun(deps, run.runId, await log.bumpEpoch(run.runId), new AbortController().signal);
  const events = (await log.read(run.runId, 0)).map((e) => e.event);
  const verdicts = events.filter((e) => e.payload.case === "reviewerVerdict").length;
  assert.ok(verdicts >= 1, "the reviewer was asked");
  const shown = projectRun(run.runId, events);
  const counted = Number(shown.usage?.inputTokens ?? 0n) + Number(shown.usage?.outputTokens ?? 0n);
  const agentCharged = charged.slice(first).reduce((a, b) => a + b, 0);
  const reviewPrompts = verdicts * Math.ceil(ARG.length / 3);
  assert.ok(
    counted >= agentCharged + reviewPrompts,
    `${verdicts} reviews of a ${ARG.length}-character preview were sent; the run's usage shows ${counted} tokens, the agent's steps alone ${agentCharged} (run ended ${shown.state} ${shown.error?.code ?? ""})`,
  );
});
