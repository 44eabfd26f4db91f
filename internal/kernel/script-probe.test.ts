/**
 * A script written by one call and run by the next waits for a person, while the
 * repository's own scripts run as before: the kernel with the default policy, a real
 * container and the embedded event log.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ulid } from "ulid";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import type { SandboxHandle } from "../sandbox/port.ts";
import { packWorkspace, type WorkspaceFile } from "../sandbox/workspace-archive.ts";
import { sandboxImage, TEST_LIMITS, testSandbox } from "../testing/docker.ts";
import { queueRun } from "../testing/worker-fixtures.ts";
import { createKernel, type KernelRun } from "./kernel.ts";
import { parsePolicy } from "./policy-loader.ts";
import { changedSinceUpload, indexWorkspace } from "./script-probe.ts";

const parsed = parsePolicy(
  readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8"),
  "policy.yaml",
);
if (!parsed.ok) throw new Error("policy.yaml does not parse");
const policy = { ...parsed.policy, tools: { test: "npm test" } };

const FILES: WorkspaceFile[] = [
  { path: "build.sh", type: "file", mode: 0o755, data: Buffer.from("echo building\n") },
  {
    path: "package.json",
    type: "file",
    mode: 0o644,
    data: Buffer.from('{"scripts":{"test":"true"}}\n'),
  },
  { path: "lib", type: "directory", mode: 0o755 },
  { path: "lib/run.sh", type: "file", mode: 0o644, data: Buffer.from("echo lib\n") },
  { path: "link.sh", type: "symlink", mode: 0o777, linkname: "build.sh" },
];

let dir: string;
let log: FileEventLog;
let box: SandboxHandle;
let cleanup: () => Promise<void>;
let run: KernelRun;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-probe-"));
  log = await openFileEventLog({ dir });
  const t = await testSandbox();
  cleanup = t.cleanup;
  box = await t.sandbox.create({
    runId: ulid(),
    tenantId: "acme",
    image: sandboxImage("test"),
    limits: TEST_LIMITS,
    network: "none",
    workspaceTar: await packWorkspace(FILES),
  });
  const q = await queueRun(log, { prompt: "p" });
  run = {
    ...q,
    fence: await log.bumpEpoch(q.runId),
    sandbox: box,
    baseIndex: async () => indexWorkspace(FILES),
  };
});
after(async () => {
  await cleanup?.();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

const sh = (cmd: string) =>
  box.exec({ argv: ["sh", "-c", cmd], timeoutMs: 10_000, maxOutputBytes: 4096 });

describe("changedSinceUpload", () => {
  it("tells new, changed, deleted, re-moded and re-linked files from untouched ones", async () => {
    const base = indexWorkspace(FILES);
    const all = ["build.sh", "package.json", "lib/run.sh", "link.sh", "s.sh", "gone.sh"];
    assert.deepEqual([...(await changedSinceUpload(box, all, base))].sort(), []);
    await sh(
      "echo x > s.sh; chmod -x build.sh; ln -sf lib/run.sh link.sh; echo '{}' >> package.json",
    );
    assert.deepEqual([...(await changedSinceUpload(box, all, base))].sort(), [
      "build.sh",
      "link.sh",
      "package.json",
      "s.sh",
    ]);
    // A parent directory swapped for a symlink, a path with a tab: changed (fail closed).
    await sh("mv lib lib2 && ln -s lib2 lib");
    const odd = await changedSinceUpload(box, ["lib/run.sh", "a\tb"], base);
    assert.deepEqual([...odd].sort(), ["a\tb", "lib/run.sh"]);
    await sh("rm lib && mv lib2 lib && chmod +x build.sh && ln -sf build.sh link.sh");
  });
});

describe("the kernel and scripts the run wrote", () => {
  it("runs the repository's own script as before, asks for one the run wrote", async () => {
    const kernel = createKernel({ log, policy: () => policy, secretProviders: [] });
    const own = await kernel.handle(run, {
      callId: "c1",
      tool: "process.run",
      input: { command: "sh build.sh" },
    });
    assert.equal(own.kind, "result", "the uploaded script runs without asking");
    await kernel.handle(run, {
      callId: "c2",
      tool: "process.run",
      input: { command: "echo 'echo pwned > p.txt' | base64 | base64 -d > s.sh" },
    });
    const written = await kernel.handle(run, {
      callId: "c3",
      tool: "process.run",
      input: { command: "sh s.sh" },
    });
    assert.equal(written.kind, "paused", "a script the run wrote waits for a person");
    assert.equal((await sh("ls p.txt 2>/dev/null; true")).stdout, "", "and did not run");
    const decisions = (await log.read(run.runId, 0)).flatMap((e) =>
      e.event.payload.case === "policyDecision" ? [e.event.payload.value] : [],
    );
    assert.match(decisions.at(-1)?.reason ?? "", /runWrittenScript/);
  });
});
