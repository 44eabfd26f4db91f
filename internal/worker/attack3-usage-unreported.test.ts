/**
 * Attack (#27 point 2, "budgets that bind": "a 1,000-token budget ended at 100,000 tokens"):
 * an OpenAI-compatible provider that streams no usage chunk (many do not honour
 * `stream_options.include_usage`: vLLM without --enable-..., proxies, older servers). The
 * run has a token budget a few prompts large; the model keeps calling tools.
 *
 * Why it passes today: ai-sdk-engine.ts takes `part.usage.inputTokens ?? 0` and
 * `outputTokens ?? 0`, so every step counts 0 tokens; drive-usage.ts overLimit() and
 * outputAllowance() compare the budget with `d.usage` (always 0) and only the single
 * request's estimate, so every step fits and the run goes on to the step limit. The
 * request estimate (request-tokens.ts) is used for one request, never added to the run's
 * usage when the provider did not report one.
 *
 * What must hold: the prompts the run sent (estimated from their bodies, ~4 bytes a token)
 * stay within a small multiple of the budget — the run ends ELIMIT_TOKENS (or counts the
 * estimate) instead of sending twenty prompts.
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
import { projectRun } from "../projections/run-projection.ts";
import type { Sandbox } from "../sandbox/port.ts";
import { sandboxImage, testSandbox } from "../testing/docker.ts";
import { stubDriverDeps } from "../testing/driver-deps.ts";
import {
  type OpenAiStub,
  type StubReply,
  startOpenAiStub,
  textReply,
  toolCallsReply,
} from "../testing/openai-stub.ts";
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

/** A reply without the usage chunk (the provider reports none). */
const noUsage = (chunks: ReturnType<typeof textReply>): StubReply => ({
  chunks: chunks.filter((c) => typeof c === "string" || !("usage" in c)),
});

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-attack3-usage-"));
  log = await openFileEventLog({ dir: join(dir, "log") });
  stub = await startOpenAiStub(() => script.shift() ?? noUsage(textReply(["done"])));
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

describe("a provider that reports no usage", { timeout: 240_000 }, () => {
  it("the token budget still binds", async () => {
    const budget = 6_000;
    const run0 = await queueRun(log, { prompt: "spend", budget: { maxTokens: BigInt(budget) } });
    script = Array.from({ length: 20 }, (_, i) =>
      noUsage(
        toolCallsReply([
          { id: `c${i}`, name: "process_run", arguments: JSON.stringify({ command: `echo ${i}` }) },
        ]),
      ),
    );
    const first = stub.requests.length;
    const deps = stubDriverDeps({ log, policy, sandbox, artifacts, baseURL: stub.baseURL });
    await driveRun(deps, run0.runId, await log.bumpEpoch(run0.runId), new AbortController().signal);
    const bodies = stub.requests.slice(first).map((r) => JSON.stringify(r.body));
    const sent = bodies.reduce((n, b) => n + Math.ceil(b.length / 4), 0);
    const run = projectRun(
      run0.runId,
      (await log.read(run0.runId, 0)).map((e) => e.event),
    );
    assert.ok(
      sent <= 2 * budget,
      `the run sent ${bodies.length} prompts of ~${sent} tokens in all under a ${budget}-token budget; it ended ${run.error?.code ?? "without error"} and counts ${run.usage?.inputTokens ?? 0n} input tokens`,
    );
  });
});
