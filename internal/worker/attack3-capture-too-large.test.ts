/**
 * ATTACK (review of issue #27 deliverable 1 after f0328b1): before-secret.ts diffNow turns a
 * diff past limits.maxPatchSize into "" (no `patch-before-secret`), and drive-end.ts
 * patchBeforeSecretCall then completes the run with an empty patch and the one fixed
 * omission WITHHELD_AFTER_SECRET ("the patch holds the run's changes up to that call").
 * The header of captureBeforeSecret says "the withheld note says why"; it does not. A run
 * with the same changes and no secret call fails ETOOLARGE naming the limit (finalDiff). So
 * a run whose changes before its secret call were too large completes as if it had changed
 * nothing before that call: the work is dropped silently and run.completed says the patch
 * holds those changes.
 * What must hold: when the changes before the first secret-carrying call were not kept, the
 * run says so (ETOOLARGE naming limits.maxPatchSize, or an omission saying the diff was too
 * large), never an empty patch described as the run's changes up to that call.
 *
 * Must never: fake the sandbox, the kernel, the log or the artifact store.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import { createEnvSecretProvider } from "../kernel/secrets.ts";
import type { Sandbox } from "../sandbox/port.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { testSandbox } from "../testing/docker.ts";
import { stubDriverDeps } from "../testing/driver-deps.ts";
import { type OpenAiStub, type StubReply, startOpenAiStub } from "../testing/openai-stub.ts";
import {
  approveInLog,
  callReply,
  queueRun,
  sayReply,
  testImagePolicy,
} from "../testing/worker-fixtures.ts";
import { driveRun } from "./run-driver.ts";

let dir: string;
let log: FileEventLog;
let stub: OpenAiStub;
let script: StubReply[] = [];
let cleanup: () => Promise<void>;
let sandbox: Sandbox;
let artifacts: FsArtifactStore;
let policy: Policy;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-capture-big-"));
  log = await openFileEventLog({ dir: join(dir, "log") });
  stub = await startOpenAiStub(
    () => script.shift() ?? { status: 500, body: { error: { message: "script exhausted" } } },
  );
  const t = await testSandbox();
  cleanup = t.cleanup;
  sandbox = t.sandbox;
  artifacts = new FsArtifactStore(join(dir, "artifacts"));
  const base = testImagePolicy();
  policy = {
    ...base,
    limits: { ...base.limits, maxPatchSize: 2048 },
    secrets: { allow: ["DEMO_TOKEN"], providers: [{ type: "env" }] },
  };
});
after(async () => {
  await cleanup?.();
  await stub?.close();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("attack: changes before the secret call too large for a patch", () => {
  it("the run completes with an empty patch said to hold its changes up to that call", async () => {
    const ws = await artifacts.put(
      await packWorkspace([
        { path: "hello.txt", type: "file", mode: 0o644, data: Buffer.from("hello\n") },
      ]),
    );
    const run = await queueRun(log, {
      prompt: "p",
      workspaceDigest: ws.digest,
      workspaceSizeBytes: ws.size,
    });
    const deps = stubDriverDeps({
      log,
      policy,
      sandbox,
      artifacts,
      baseURL: stub.baseURL,
      secretProviders: [createEnvSecretProvider({ DEMO_TOKEN: "bigCapture-Value-99" })],
    });
    const payloads = async () => (await log.read(run.runId, 0)).map((e) => e.event.payload);
    const fenced = async () =>
      driveRun(deps, run.runId, await log.bumpEpoch(run.runId), new AbortController().signal);
    const big = Array.from({ length: 400 }, (_, i) => `line ${i} of the model's work`).join("\n");
    script = [
      callReply("e", "repo.patch", {
        path: "hello.txt",
        edits: [{ oldText: "hello", newText: big }],
      }),
      callReply("w", "process.run", { command: 'printf %s "$ENV.DEMO_TOKEN" > tok.txt' }),
      sayReply("done"),
    ];
    // Approve whatever asks (the model's patch if the policy asks, then the secret call).
    for (let i = 0; i < 4; i++) {
      const end = await fenced();
      if (end !== "paused") break;
      const all = await payloads();
      const asked = all.filter((p) => p.case === "approvalRequested").at(-1);
      assert.ok(asked?.case === "approvalRequested", "paused for an approval");
      await approveInLog(log, run, asked.value.approvalId);
    }
    const all = await payloads();
    const edited = all.find((p) => p.case === "toolResult" && p.value.callId === "e");
    assert.ok(edited?.case === "toolResult" && edited.value.ok, "the model's change was made");
    const ran = all.find((p) => p.case === "toolResult" && p.value.callId === "w");
    assert.ok(ran?.case === "toolResult" && ran.value.ok, "the secret call ran");
    const end = all.at(-1);
    assert.ok(end !== undefined);
    if (end.case === "runFailed") return; // ETOOLARGE: the defence the test asks for
    assert.ok(end.case === "runCompleted", `the run ended: ${end.case}`);
    const says = JSON.stringify(end.value.patchOmitted.map((o) => `${o.path}: ${o.reason}`));
    assert.ok(
      end.value.patchDigest !== "" || /too large|maxPatchSize|limit/i.test(says),
      `the model's change before the secret call is gone and run.completed does not say why: patch "${end.value.patchDigest}", omitted ${says}`,
    );
  });
});
