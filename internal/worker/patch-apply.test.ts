/**
 * The patch artifacts of real runs apply: a Node and a Python repository, each driven by a
 * scripted model on the Debian base image — a patch, the tests run (Python writes
 * __pycache__), a binary file, symlinks out of the tree (`ln -s / r`, `ln -s /etc/passwd
 * pw`), an in-tree symlink, ignored build output. The run's patch artifact must pass
 * `git apply --check` and `git apply` on a fresh checkout of the uploaded workspace, with no
 * symlink leaving the tree and no ignored file in it.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import { packWorkspace, type WorkspaceFile } from "../sandbox/workspace-archive.ts";
import { sandboxImage, testSandbox } from "../testing/docker.ts";
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
let artifacts: FsArtifactStore;
let policy: Policy;
let sandbox: Awaited<ReturnType<typeof testSandbox>>["sandbox"];

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-apply-"));
  log = await openFileEventLog({ dir: join(dir, "log") });
  stub = await startOpenAiStub(() => script.shift() ?? { status: 500, body: {} });
  artifacts = new FsArtifactStore(join(dir, "artifacts"));
  const base = testImagePolicy();
  policy = {
    ...base,
    sandbox: { ...base.sandbox, image: sandboxImage("base"), memory: 512 * 1024 ** 2, pids: 256 },
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

const file = (path: string, text: string, mode = 0o644): WorkspaceFile => ({
  path,
  type: "file",
  mode,
  data: Buffer.from(text),
});

/** Drives a scripted run on `files` (approving whatever asks) and returns its patch. */
async function patchOf(files: WorkspaceFile[], calls: StubReply[]): Promise<string> {
  const ws = await artifacts.put(await packWorkspace(files));
  const run = await queueRun(log, {
    prompt: "change it",
    workspaceDigest: ws.digest,
    workspaceSizeBytes: ws.size,
  });
  script = [...calls, sayReply("done")];
  const stop = new AbortController();
  const approver = (async () => {
    for await (const ev of log.follow(run.runId, 0, stop.signal))
      if (ev.event.payload.case === "approvalRequested")
        await approveInLog(log, run, ev.event.payload.value.approvalId);
  })();
  const outcome = await driveRun(
    stubDriverDeps(
      { log, policy, sandbox, artifacts, baseURL: stub.baseURL },
      { approvalHoldMs: 30_000 },
    ),
    run.runId,
    await log.bumpEpoch(run.runId),
    stop.signal,
  );
  stop.abort();
  await approver;
  const events = (await log.read(run.runId, 0)).map((e) => e.event.payload);
  const failedCalls = events.flatMap((p) =>
    p.case === "toolResult" && !p.value.ok ? [p.value] : [],
  );
  assert.equal(outcome, "completed", JSON.stringify(failedCalls.map((r) => r.error)));
  const done = events.at(-1);
  assert.ok(done?.case === "runCompleted" && done.value.patchDigest !== "");
  const parts: Uint8Array[] = [];
  for await (const c of artifacts.read(done.value.patchDigest)) parts.push(c);
  return Buffer.concat(parts).toString("utf8");
}

/** A git checkout of `files` with the patch applied; returns its directory. */
function applied(files: WorkspaceFile[], patch: string): string {
  const repo = mkdtempSync(join(dir, "repo-"));
  for (const f of files) {
    const p = join(repo, f.path);
    mkdirSync(dirname(p), { recursive: true });
    writeFileSync(p, f.data ?? "", { mode: f.mode });
  }
  const git = (...args: string[]) =>
    execFileSync("git", args, { cwd: repo, stdio: "pipe" }).toString();
  git("init", "-q");
  git("-c", "user.email=t@t", "-c", "user.name=t", "add", "-A");
  git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "upload");
  writeFileSync(join(dir, "p.diff"), patch);
  git("apply", "--check", join(dir, "p.diff"));
  git("apply", join(dir, "p.diff"));
  return repo;
}

const outOfTree = (repo: string) =>
  ["r", "pw"].filter((n) => existsSync(join(repo, n)) || lstatIsLink(join(repo, n)));
function lstatIsLink(p: string): boolean {
  try {
    return lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}

const HOSTILE = [
  callReply("bin", "process.run", { command: "printf 'a\\000b\\001c\\377' > data.bin" }),
  callReply("lnk", "process.run", {
    command: "ln -s / r; ln -s /etc/passwd pw; ln -s lib.txt alias.txt",
  }),
];

describe("the patch of a real run applies", () => {
  it("a Node repository", { timeout: 120_000 }, async () => {
    const files = [
      file("package.json", '{"name":"x","scripts":{"test":"node --test"}}\n'),
      file(".gitignore", "node_modules/\ndist/\n"),
      file("lib.txt", "old\n"),
      file("sum.js", "module.exports = (a, b) => a - b;\n"),
      file(
        "sum.test.js",
        "const t=require('node:test');const a=require('node:assert');const s=require('./sum.js');t.test('sum',()=>a.equal(s(1,2),3));\n",
      ),
    ];
    const patch = await patchOf(files, [
      callReply("p", "repo.patch", {
        path: "sum.js",
        edits: [{ oldText: "a - b", newText: "a + b" }],
      }),
      callReply("t", "process.run", {
        command:
          "node --test; mkdir -p node_modules/dep dist && echo x > node_modules/dep/i.js && echo y > dist/o.js",
      }),
      ...HOSTILE,
    ]);
    assert.doesNotMatch(patch, /node_modules|dist\//, "ignored files stay out");
    const repo = applied(files, patch);
    assert.equal(readFileSync(join(repo, "sum.js"), "utf8"), "module.exports = (a, b) => a + b;\n");
    assert.deepEqual(
      readFileSync(join(repo, "data.bin")),
      Buffer.from([0x61, 0, 0x62, 1, 0x63, 0xff]),
    );
    assert.deepEqual(outOfTree(repo), [], "no symlink leaves the tree");
    assert.ok(lstatIsLink(join(repo, "alias.txt")), "an in-tree symlink is kept");
  });

  it("a Python repository (its tests write __pycache__)", { timeout: 120_000 }, async () => {
    const files = [
      file(".gitignore", "__pycache__/\n*.pyc\n"),
      file("lib.txt", "old\n"),
      file("calc.py", "def add(a, b):\n    return a - b\n"),
      file(
        "test_calc.py",
        "import unittest\nimport calc\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(calc.add(1, 2), 3)\n",
      ),
    ];
    const patch = await patchOf(files, [
      callReply("p", "repo.patch", {
        path: "calc.py",
        edits: [{ oldText: "a - b", newText: "a + b" }],
      }),
      callReply("t", "process.run", { command: "python3 -m unittest -q; ls __pycache__" }),
      ...HOSTILE,
    ]);
    assert.doesNotMatch(patch, /__pycache__|\.pyc/, "ignored files stay out");
    const repo = applied(files, patch);
    assert.match(readFileSync(join(repo, "calc.py"), "utf8"), /return a \+ b/);
    assert.deepEqual(outOfTree(repo), []);
    execFileSync("python3", ["-m", "unittest", "-q"], { cwd: repo, stdio: "pipe" });
  });
});
