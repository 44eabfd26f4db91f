/**
 * The run's image by detection under the repository's default policy.yaml (which names no
 * sandbox.image): a go.mod workspace gets the Go image, its `go test` passes there, and
 * run.started says which image and why; `.agent/config.yaml` `image:` overrides detection;
 * an ecosystem image the engine lacks falls back to base, and run.started says so. Real
 * parts: the embedded event log, the language images in real containers (`make images`),
 * the kernel and the AI SDK against a scripted model.
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
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { testSandbox } from "../testing/docker.ts";
import { stubDriverDeps } from "../testing/driver-deps.ts";
import { type OpenAiStub, type StubReply, startOpenAiStub } from "../testing/openai-stub.ts";
import { callReply, queueRun, sayReply } from "../testing/worker-fixtures.ts";
import { driveRun } from "./run-driver.ts";

const DEFAULT_POLICY = join(import.meta.dirname, "..", "..", "policy.yaml");
let dir: string;
let log: FileEventLog;
let stub: OpenAiStub;
let script: StubReply[] = [];
let sandbox: Sandbox;
let artifacts: FsArtifactStore;
let policy: Policy;
let cleanup: () => Promise<void>;

const GO_MODULE = {
  "go.mod": "module example.com/calc\n\ngo 1.19\n",
  "calc.go": "package calc\n\nfunc Add(a, b int) int { return a + b }\n",
  "calc_test.go":
    'package calc\n\nimport "testing"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal("bad sum")\n\t}\n}\n',
};

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-run-image-"));
  log = await openFileEventLog({ dir: join(dir, "log") });
  stub = await startOpenAiStub(() => script.shift() ?? { status: 500, body: {} });
  artifacts = new FsArtifactStore(join(dir, "artifacts"));
  const loaded = readPolicyFile(DEFAULT_POLICY);
  assert.ok(loaded.ok, JSON.stringify(loaded.ok ? "" : loaded.errors));
  assert.equal(loaded.policy.sandbox.image, undefined, "the default policy names no image");
  policy = loaded.policy;
  const t = await testSandbox();
  sandbox = t.sandbox;
  cleanup = t.cleanup;
  for (const image of ["agentd-sandbox-go:latest", "agentd-sandbox-python:latest"])
    assert.ok(await sandbox.hasImage?.(image), `${image} is not built: run 'make images'`);
});
after(async () => {
  await cleanup?.();
  await stub?.close();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Outcome {
  started: { image: string; ecosystem: string; imageReason: string };
  test: {
    ok: boolean;
    out: { command?: string; exitCode?: number; stdout?: string };
    error: { code: string; message: string };
  };
}

/** One run on a workspace of `files` that calls test.run once, on `box`. */
async function runOn(files: Record<string, string>, box: Sandbox = sandbox): Promise<Outcome> {
  const ws = await artifacts.put(
    await packWorkspace(
      Object.entries(files).map(([path, text]) => ({
        path,
        type: "file" as const,
        mode: 0o644,
        data: Buffer.from(text),
      })),
    ),
  );
  const run = await queueRun(log, {
    prompt: "run the tests",
    workspaceDigest: ws.digest,
    workspaceSizeBytes: ws.size,
  });
  script = [callReply("t1", "test.run", {}), sayReply("done")];
  const deps = stubDriverDeps({ log, policy, sandbox: box, artifacts, baseURL: stub.baseURL });
  const outcome = await driveRun(
    deps,
    run.runId,
    await log.bumpEpoch(run.runId),
    new AbortController().signal,
  );
  assert.equal(outcome, "completed");
  const events = (await log.read(run.runId, 0)).map((e) => e.event.payload);
  const started = events.find((p) => p.case === "runStarted");
  assert.ok(started?.case === "runStarted", "run.started was recorded");
  // The model's call (t1), not the setup's (a go.mod workspace gets one before it).
  const result = events.find((p) => p.case === "toolResult" && p.value.callId === "t1");
  assert.ok(result?.case === "toolResult", "test.run has a result");
  const doc = JSON.parse(result.value.outputJson || "{}") as { result?: Outcome["test"]["out"] };
  return {
    started: started.value,
    test: {
      ok: result.value.ok,
      out: doc.result ?? (doc as Outcome["test"]["out"]),
      error: { code: result.value.error?.code ?? "", message: result.value.error?.message ?? "" },
    },
  };
}

describe("the run's image", () => {
  it("a go.mod workspace runs on the Go image, go test passes there, run.started says why", async () => {
    const { started, test } = await runOn(GO_MODULE);
    assert.equal(started.image, "agentd-sandbox-go:latest");
    assert.equal(started.ecosystem, "go");
    assert.equal(started.imageReason, "detected go from go.mod (test command: go)");
    assert.ok(test.ok, JSON.stringify(test));
    assert.equal(test.out.command, "go test -json ./...");
    assert.equal(test.out.exitCode, 0, JSON.stringify(test.out));
    assert.match(test.out.stdout ?? "", /^ok\s+example\.com\/calc/m);
  });

  it(".agent/config.yaml image: python overrides the detected go", async () => {
    const { started, test } = await runOn({
      ...GO_MODULE,
      ".agent/config.yaml": "image: python\n",
    });
    assert.deepEqual(
      [started.image, started.ecosystem, started.imageReason],
      ["agentd-sandbox-python:latest", "python", ".agent/config.yaml image"],
    );
    // The Python image has no go: the run is where it was put, and test.run's error says so.
    assert.equal(test.ok, false);
    assert.match(
      test.error.message,
      /\bgo\b.*agentd-sandbox-go:latest/s,
      JSON.stringify(test.error),
    );
  });

  it("an ecosystem image missing from the engine: base, and run.started names the missing image", async () => {
    const lacking: Sandbox = { ...sandbox, hasImage: async () => false };
    const { started, test } = await runOn(GO_MODULE, lacking);
    assert.equal(started.image, "agentd-sandbox-base:latest");
    assert.equal(started.ecosystem, "base");
    assert.match(
      started.imageReason,
      /^detected go from go\.mod .*; agentd-sandbox-go:latest is not on the Docker engine \(make images IMAGES=go\), so base$/,
    );
    // base has no go: the test command is not found, and the error names the image with it.
    assert.equal(test.ok, false);
    assert.match(
      test.error.message,
      /\bgo\b.*agentd-sandbox-go:latest/s,
      JSON.stringify(test.error),
    );
  });
});
