/**
 * Attack (#27 point 2: "the model request carries a maximum derived from what is left of
 * the token and cost budget"): a run whose budget leaves more than 16,384 tokens after its
 * prompt (here 40,000 left) asks the model with no maximum at all. Models priced in the
 * worker's table write far more than 16,384 tokens when let (gpt-4.1: 32,768; o3, o4-mini:
 * 100,000; gpt-5: 128,000): the step can spend two or three times what the budget left.
 *
 * Why: drive-usage.ts outputAllowance() returns `cap: undefined` when the cap is at or above
 * the ceiling (drive-step.ts DEFAULT_OUTPUT_CEILING, 16,384, "there the model's own limit
 * binds instead"); the model's own limit is not the budget. Sending the ceiling itself
 * (min(cap, ceiling)) would keep both the provider's rule and the budget.
 *
 * What must hold: every request of a run with a token budget carries a maximum output, and
 * it is at most what the budget has left after the prompt.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { readPolicyFile } from "../kernel/policy-loader.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import type { Sandbox } from "../sandbox/port.ts";
import { startChargingStub } from "../testing/charging-stub.ts";
import { sandboxImage, testSandbox } from "../testing/docker.ts";
import { stubDriverDeps } from "../testing/driver-deps.ts";
import { type OpenAiStub, type StubReply, textReply } from "../testing/openai-stub.ts";
import { queueRun } from "../testing/worker-fixtures.ts";
import { driveRun } from "./run-driver.ts";

let dir: string;
let log: FileEventLog;
let stub: OpenAiStub;
let script: StubReply[] = [];
let sandbox: Sandbox;
let policy: Policy;
let artifacts: FsArtifactStore;
let cleanup: () => Promise<void>;

const charged: number[] = [];

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-attack3-ceiling-"));
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

describe("a budget larger than the output ceiling", { timeout: 240_000 }, () => {
  it("the request still carries a maximum no larger than what is left", async () => {
    // What the first prompt costs (the stub charges ~4 bytes of the body a token).
    const probe = await queueRun(log, { prompt: "spend" });
    script = [{ chunks: textReply(["done"]) }];
    const deps = stubDriverDeps({ log, policy, sandbox, artifacts, baseURL: stub.baseURL });
    await driveRun(
      deps,
      probe.runId,
      await log.bumpEpoch(probe.runId),
      new AbortController().signal,
    );
    const p0 = charged.at(-1) ?? 0;
    assert.ok(p0 > 500, `the first prompt is hundreds of tokens (${p0})`);
    const left = 40_000;
    const run0 = await queueRun(log, { prompt: "spend", budget: { maxTokens: BigInt(p0 + left) } });
    script = [{ chunks: textReply(["done"]) }];
    const first = stub.requests.length;
    await driveRun(deps, run0.runId, await log.bumpEpoch(run0.runId), new AbortController().signal);
    const body = stub.requests[first]?.body as {
      max_tokens?: number;
      max_completion_tokens?: number;
    };
    const max = body?.max_tokens ?? body?.max_completion_tokens;
    assert.ok(
      max !== undefined && max <= left,
      `the request asked for ${max === undefined ? "no maximum" : max} output tokens with ${left} of the budget left after its ${p0}-token prompt`,
    );
  });
});
