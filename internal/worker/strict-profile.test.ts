/**
 * A scripted run under the strict profile (deploy/policies/strict.yaml): every repo.patch,
 * process.run, test.run and lint.run waits for a person; reads do not. Real parts: the
 * embedded event log, a real container, the kernel and the AI SDK against a scripted
 * OpenAI-compatible server; a person approves in the log as each approval appears.
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
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { sandboxImage, testSandbox } from "../testing/docker.ts";
import { stubDriverDeps } from "../testing/driver-deps.ts";
import { type OpenAiStub, type StubReply, startOpenAiStub } from "../testing/openai-stub.ts";
import { approveInLog, callReply, queueRun, sayReply } from "../testing/worker-fixtures.ts";
import { driveRun } from "./run-driver.ts";

const STRICT = join(import.meta.dirname, "..", "..", "deploy", "policies", "strict.yaml");
let dir: string;
let log: FileEventLog;
let stub: OpenAiStub;
let script: StubReply[] = [];
let cleanup: () => Promise<void>;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-strict-"));
  log = await openFileEventLog({ dir: join(dir, "log") });
  stub = await startOpenAiStub(() => script.shift() ?? { status: 500, body: {} });
});
after(async () => {
  await cleanup?.();
  await stub?.close();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("the strict profile", () => {
  it("pauses every mutation of a scripted run for a person, and no read", async () => {
    const loaded = readPolicyFile(STRICT);
    assert.ok(loaded.ok, JSON.stringify(loaded.ok ? "" : loaded.errors));
    const policy: Policy = {
      ...loaded.policy,
      sandbox: { ...loaded.policy.sandbox, image: sandboxImage("test"), memory: 128 << 20 },
      tools: { test: "true", lint: "true" },
    };
    const t = await testSandbox();
    cleanup = t.cleanup;
    const artifacts = new FsArtifactStore(join(dir, "artifacts"));
    const ws = await artifacts.put(
      await packWorkspace([{ path: "a.txt", type: "file", mode: 0o644, data: Buffer.from("a\n") }]),
    );
    const run = await queueRun(log, {
      prompt: "change a.txt",
      workspaceDigest: ws.digest,
      workspaceSizeBytes: ws.size,
    });
    script = [
      callReply("r1", "repo.read", { path: "a.txt" }),
      callReply("s1", "repo.search", { query: "a" }),
      callReply("p1", "repo.patch", { path: "a.txt", edits: [{ oldText: "a", newText: "b" }] }),
      callReply("x1", "process.run", { command: "ls" }),
      callReply("t1", "test.run", {}),
      callReply("l1", "lint.run", {}),
      sayReply("done"),
    ];
    // A person approves each approval as it appears.
    const stop = new AbortController();
    const approver = (async () => {
      for await (const ev of log.follow(run.runId, 0, stop.signal)) {
        const p = ev.event.payload;
        if (p.case === "approvalRequested") await approveInLog(log, run, p.value.approvalId);
      }
    })();
    const deps = stubDriverDeps(
      { log, policy, sandbox: t.sandbox, artifacts, baseURL: stub.baseURL },
      { approvalHoldMs: 30_000 },
    );
    const outcome = await driveRun(deps, run.runId, await log.bumpEpoch(run.runId), stop.signal);
    stop.abort();
    await approver;
    assert.equal(outcome, "completed");
    const events = (await log.read(run.runId, 0)).map((e) => e.event.payload);
    const asked = new Set(
      events.flatMap((p) => (p.case === "approvalRequested" ? [p.value.callId] : [])),
    );
    assert.deepEqual([...asked].sort(), ["l1", "p1", "t1", "x1"]);
    const results = events.flatMap((p) => (p.case === "toolResult" ? [p.value] : []));
    assert.deepEqual(
      results.map((r) => r.callId),
      ["r1", "s1", "p1", "x1", "t1", "l1"],
    );
    // (repo.search needs ripgrep, which the busybox test image lacks: it only must not ask.)
    assert.deepEqual(
      results.filter((r) => r.callId !== "s1").map((r) => [r.callId, r.ok]),
      ["r1", "p1", "x1", "t1", "l1"].map((id) => [id, true]),
      "each call ran once its approval came",
    );
  });
});
