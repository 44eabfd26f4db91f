/**
 * test.run and lint.run under the repository's default policy.yaml (which sets no command):
 * the command comes from the uploaded workspace — a Node, a Python (unittest, no pytest
 * installed) and a Makefile repository — runs without asking anyone, and its result names
 * the command and where it came from. Real parts: the embedded event log, the base sandbox
 * image in a real container, the kernel and the AI SDK against a scripted model.
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
import { sandboxImage, testSandbox } from "../testing/docker.ts";
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

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-detect-"));
  log = await openFileEventLog({ dir: join(dir, "log") });
  stub = await startOpenAiStub(() => script.shift() ?? { status: 500, body: {} });
  artifacts = new FsArtifactStore(join(dir, "artifacts"));
  const loaded = readPolicyFile(DEFAULT_POLICY);
  assert.ok(loaded.ok, JSON.stringify(loaded.ok ? "" : loaded.errors));
  assert.deepEqual(loaded.policy.tools, {}, "the default policy sets no command");
  policy = {
    ...loaded.policy,
    sandbox: { ...loaded.policy.sandbox, image: sandboxImage("base"), memory: 512 << 20 },
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

interface Result {
  callId: string;
  ok: boolean;
  out: { command?: string; source?: string; exitCode?: number; stdout?: string; stderr?: string };
  error: string;
}

/** Runs the scripted calls on a workspace of `files`; the tool results, and who was asked. */
async function runOn(
  files: Record<string, string>,
  calls: StubReply[],
): Promise<{ results: Result[]; asked: number }> {
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
  script = [...calls, sayReply("done")];
  const deps = stubDriverDeps({ log, policy, sandbox, artifacts, baseURL: stub.baseURL });
  const stop = new AbortController();
  const outcome = await driveRun(deps, run.runId, await log.bumpEpoch(run.runId), stop.signal);
  assert.equal(outcome, "completed");
  const events = (await log.read(run.runId, 0)).map((e) => e.event.payload);
  const results = events.flatMap((p) =>
    p.case === "toolResult"
      ? [
          {
            callId: p.value.callId,
            ok: p.value.ok,
            out: outputOf(p.value.outputJson),
            error: p.value.error?.message ?? "",
          },
        ]
      : [],
  );
  return { results, asked: events.filter((p) => p.case === "approvalRequested").length };
}

/** A result's output; a previewed call's is `{ preview, result }`. */
function outputOf(json: string): Result["out"] {
  if (json === "") return {};
  const doc = JSON.parse(json) as { result?: Result["out"] } & Result["out"];
  return doc.result ?? doc;
}

const passed = (r: Result | undefined, what: string): Result => {
  assert.ok(r !== undefined, `${what}: no result`);
  assert.ok(r.ok, `${what}: ${r.error}`);
  assert.equal(r.out.exitCode, 0, `${what}: ${r.out.stdout} ${r.out.stderr}`);
  return r;
};

describe("test.run and lint.run under the default policy", () => {
  it("a Node repository: npm test and npm run lint from package.json", async () => {
    const { results, asked } = await runOn(
      {
        "package.json": JSON.stringify({
          name: "n",
          scripts: { test: "node --test", lint: "node -e \"console.log('lint ok')\"" },
        }),
        "add.js": "module.exports = (a, b) => a + b;\n",
        "add.test.js":
          "const t = require('node:test'); const add = require('./add.js');\nt.test('adds', () => { if (add(1, 2) !== 3) throw new Error('no'); });\n",
      },
      [callReply("t1", "test.run", {}), callReply("l1", "lint.run", {})],
    );
    assert.equal(asked, 0, "low risk: nobody is asked");
    const t = passed(
      results.find((r) => r.callId === "t1"),
      "test.run",
    );
    assert.deepEqual([t.out.command, t.out.source], ["npm test", "package.json scripts.test"]);
    const l = passed(
      results.find((r) => r.callId === "l1"),
      "lint.run",
    );
    assert.deepEqual([l.out.command, l.out.source], ["npm run lint", "package.json scripts.lint"]);
    assert.match(l.out.stdout ?? "", /lint ok/);
  });

  it("a Python repository with unittest (no pytest in the image), one test by name", async () => {
    const { results, asked } = await runOn(
      {
        "calc.py": "def add(a, b):\n    return a + b\n",
        "tests/test_calc.py":
          "import unittest\nimport calc\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(calc.add(1, 2), 3)\n\n    def test_other(self):\n        self.assertTrue(True)\n",
      },
      [callReply("t1", "test.run", {}), callReply("t2", "test.run", { name: "test_add" })],
    );
    assert.equal(asked, 0);
    const all = passed(
      results.find((r) => r.callId === "t1"),
      "all tests",
    );
    assert.equal(all.out.command, "python3 -m unittest discover -s tests");
    assert.match(all.out.source ?? "", /tests\/test_calc\.py.*unittest/);
    assert.match(all.out.stderr ?? "", /Ran 2 tests/);
    const one = passed(
      results.find((r) => r.callId === "t2"),
      "one test",
    );
    assert.equal(one.out.command, "python3 -m unittest discover -s tests -k 'test_add'");
    assert.match(one.out.stderr ?? "", /Ran 1 test\b/);
  });

  it("a Makefile repository: make test; no lint target is a typed error naming the places", async () => {
    const { results } = await runOn({ Makefile: "test:\n\t@echo make-test-ran\n" }, [
      callReply("t1", "test.run", {}),
      callReply("l1", "lint.run", {}),
    ]);
    const t = passed(
      results.find((r) => r.callId === "t1"),
      "make test",
    );
    assert.deepEqual([t.out.command, t.out.source], ["make test", "Makefile target test"]);
    assert.match(t.out.stdout ?? "", /make-test-ran/);
    const l = results.find((r) => r.callId === "l1");
    assert.equal(l?.ok, false);
    assert.match(l?.error ?? "", /no lint command: the policy sets none \(tools\.lint\)/);
  });

  it("a bad .agent/config.yaml is named in the error, and nothing else runs instead", async () => {
    const { results } = await runOn(
      {
        ".agent/config.yaml": "commands:\n  test: [not, a, string]\n",
        "package.json": JSON.stringify({ scripts: { test: "echo should-not-run" } }),
      },
      [callReply("t1", "test.run", {})],
    );
    const t = results.find((r) => r.callId === "t1");
    assert.equal(t?.ok, false);
    assert.match(t?.error ?? "", /\.agent\/config\.yaml: commands\.test: /);
  });
});
