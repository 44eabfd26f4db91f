/**
 * What the runners reach besides their command line (runner-trees.ts), end to end: the
 * default policy, real containers (the base image, which has npm) and the embedded event
 * log. lint.run (approval: never) runs an uploaded node_modules bin without asking, and waits
 * for a person — running nothing — once a call other than a runner wrote a file there (the
 * bin itself, the package file its link resolves to), a conftest.py in a subdirectory, or a
 * toolchain cache; what setup.run itself installs does not make it ask.
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
import { createKernel, type Kernel, type KernelRun } from "./kernel.ts";
import { parsePolicy } from "./policy-loader.ts";
import { scanRunnerTrees, treeChanges } from "./runner-trees.ts";
import { indexWorkspace } from "./script-probe.ts";

const parsed = parsePolicy(
  readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8"),
  "policy.yaml",
);
if (!parsed.ok) throw new Error("policy.yaml does not parse");
const policy = {
  ...parsed.policy,
  tools: {
    lint: "npm run lint",
    test: "echo tested",
    setup: "mkdir -p node_modules/dep && echo 'module.exports = 1' > node_modules/dep/index.js",
  },
};

const PACKAGE = '{"name":"w","version":"1.0.0","scripts":{"lint":"eslint ."}}\n';
const ESLINT = "#!/usr/bin/env node\nconsole.log('linted');\n";
const FILES: WorkspaceFile[] = [
  { path: "package.json", type: "file", mode: 0o644, data: Buffer.from(PACKAGE) },
  { path: "node_modules", type: "directory", mode: 0o755 },
  { path: "node_modules/eslint", type: "directory", mode: 0o755 },
  { path: "node_modules/eslint/bin", type: "directory", mode: 0o755 },
  {
    path: "node_modules/eslint/bin/eslint.js",
    type: "file",
    mode: 0o755,
    data: Buffer.from(ESLINT),
  },
  { path: "node_modules/.bin", type: "directory", mode: 0o755 },
  {
    path: "node_modules/.bin/eslint",
    type: "symlink",
    mode: 0o777,
    linkname: "../eslint/bin/eslint.js",
  },
  { path: "tests", type: "directory", mode: 0o755 },
  { path: "tests/unit", type: "directory", mode: 0o755 },
  {
    path: "tests/unit/test_a.py",
    type: "file",
    mode: 0o644,
    data: Buffer.from("def test_a(): pass\n"),
  },
];

let dir: string;
let log: FileEventLog;
let cleanup: () => Promise<void>;
let create: (files?: WorkspaceFile[]) => Promise<{ run: KernelRun; box: SandboxHandle }>;
const kernel = (): Kernel => createKernel({ log, policy: () => policy, secretProviders: [] });

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-runner-path-"));
  log = await openFileEventLog({ dir });
  const t = await testSandbox();
  cleanup = t.cleanup;
  create = async (files = FILES) => {
    const box = await t.sandbox.create({
      runId: ulid(),
      tenantId: "acme",
      image: sandboxImage("base"),
      limits: TEST_LIMITS,
      network: "none",
      workspaceTar: await packWorkspace(files),
    });
    const q = await queueRun(log, { prompt: "p" });
    const run: KernelRun = {
      ...q,
      fence: await log.bumpEpoch(q.runId),
      sandbox: box,
      baseIndex: async () => indexWorkspace(files),
      pristine: true,
    };
    return { run, box };
  };
});
after(async () => {
  await cleanup?.();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

const sh = async (box: SandboxHandle, cmd: string): Promise<string> =>
  (await box.exec({ argv: ["sh", "-c", cmd], timeoutMs: 30_000, maxOutputBytes: 4096 })).stdout;

/** The matched rules of the run's last decision. */
async function lastMatched(run: KernelRun): Promise<string[]> {
  const decisions = (await log.read(run.runId, 0)).flatMap((e) =>
    e.event.payload.case === "policyDecision" ? [e.event.payload.value] : [],
  );
  const d = decisions.at(-1);
  assert.ok(d, "a decision was recorded");
  return [...d.reason.matchAll(/provenance:run-written:([^,;)\]\s]+)/g)].map((m) => m[1] as string);
}

/** A process.run that must run without a person (the write the model hides its code in). */
async function write(k: Kernel, run: KernelRun, id: string, command: string): Promise<void> {
  const out = await k.handle(run, { callId: id, tool: "process.run", input: { command } });
  assert.equal(out.kind, "result", `${command}: ${JSON.stringify(out)}`);
}

describe("the runner's PATH and trees, with a real sandbox", () => {
  it("lint.run runs the uploaded bin, and asks once a call rewrote the file its link resolves to", async () => {
    const { run, box } = await create();
    const k = kernel();
    await write(k, run, "w0", "echo notes > notes.txt"); // a write: the run is no longer pristine
    const own = await k.handle(run, { callId: "l1", tool: "lint.run", input: {} });
    assert.equal(own.kind, "result", JSON.stringify(own));
    assert.match(JSON.stringify(own), /linted/);
    await write(
      k,
      run,
      "w1",
      "printf '#!/bin/sh\\ntouch pwned\\n' > node_modules/eslint/bin/eslint.js",
    );
    const l = await k.handle(run, { callId: "l2", tool: "lint.run", input: {} });
    assert.equal(l.kind, "paused", JSON.stringify(l));
    assert.ok((await lastMatched(run)).includes("node_modules/eslint/bin/eslint.js"));
    assert.equal(await sh(box, "ls pwned 2>/dev/null; true"), "", "the model's script did not run");
  });

  it("a model-written node_modules/.bin/eslint waits for a person, in lint.run and in process.run's npm run lint", async () => {
    // The upload has no bin of that name: the model's is the only eslint on npm's PATH.
    const { run, box } = await create(FILES.filter((f) => f.path !== "node_modules/.bin/eslint"));
    const k = kernel();
    await write(
      k,
      run,
      "w1",
      "mkdir -p node_modules/.bin && cp /usr/bin/env node_modules/.bin/eslint && printf '#!/bin/sh\\ntouch pwned\\n' > node_modules/.bin/eslint",
    );
    const l = await k.handle(run, { callId: "l1", tool: "lint.run", input: {} });
    assert.equal(l.kind, "paused", JSON.stringify(l));
    assert.ok((await lastMatched(run)).includes("node_modules/.bin/eslint"));
    const p = await k.handle(run, {
      callId: "p1",
      tool: "process.run",
      input: { command: "npm run lint" },
    });
    assert.equal(p.kind, "paused", JSON.stringify(p));
    assert.equal(await sh(box, "ls pwned 2>/dev/null; true"), "", "the model's script did not run");
  });

  it("test.run asks when a call wrote conftest.py in a subdirectory or a venv's sitecustomize.py", async () => {
    const { run, box } = await create();
    const k = kernel();
    // Writing conftest.py is itself a build file (risk.buildPaths: a person approves it):
    // here a recorded call makes the run not pristine, and the file is written beside it.
    await write(k, run, "w1", "echo notes > notes.txt");
    await sh(box, "printf 'import os\\n' > /workspace/tests/unit/conftest.py");
    const t = await k.handle(run, { callId: "t1", tool: "test.run", input: {} });
    assert.equal(t.kind, "paused", JSON.stringify(t));
    assert.ok((await lastMatched(run)).includes("tests/unit/conftest.py"));
    const { run: run2 } = await create();
    await write(
      k,
      run2,
      "w2",
      "mkdir -p .venv/lib/python3.11/site-packages && printf 'import os\\n' > .venv/lib/python3.11/site-packages/sitecustomize.py",
    );
    const t2 = await k.handle(run2, { callId: "t2", tool: "test.run", input: {} });
    assert.equal(t2.kind, "paused", JSON.stringify(t2));
    assert.ok(
      (await lastMatched(run2)).includes(".venv/lib/python3.11/site-packages/sitecustomize.py"),
    );
  });

  it("what setup.run installs does not make lint.run ask; a toolchain cache another call wrote does", async () => {
    const { run } = await create();
    const k = kernel();
    const s = await k.handle(run, { callId: "s1", tool: "setup.run", input: {} });
    assert.equal(s.kind, "result", JSON.stringify(s));
    const l = await k.handle(run, { callId: "l1", tool: "lint.run", input: {} });
    assert.equal(l.kind, "result", JSON.stringify(l));
    await write(
      k,
      run,
      "w1",
      "mkdir -p /tmp/.cache/go/pkg/mod/x && echo 'package x' > /tmp/.cache/go/pkg/mod/x/x.go",
    );
    const l2 = await k.handle(run, { callId: "l2", tool: "lint.run", input: {} });
    assert.equal(l2.kind, "paused", JSON.stringify(l2));
    assert.ok((await lastMatched(run)).includes("/tmp/.cache/go/pkg/mod/x/x.go"));
  });

  it("without a baseline (a run taken over after writes) the trees count as written, until a runner ran", async () => {
    const { run } = await create();
    run.pristine = false; // as a drive that takes over a run whose calls already wrote
    const k = kernel();
    const call = { callId: "l1", tool: "lint.run", input: {} };
    const l = await k.handle(run, call);
    assert.equal(l.kind, "paused", JSON.stringify(l));
    assert.ok((await lastMatched(run)).includes("node_modules/.bin/eslint"));
    const approved = await k.continueAfterApproval(run, call, { approved: true, reason: "seen" });
    assert.equal(approved.kind, "result", JSON.stringify(approved));
    const again = await k.handle(run, { callId: "l2", tool: "lint.run", input: {} });
    assert.equal(again.kind, "result", JSON.stringify(again));
  });

  it("the portable listing (a find without -printf) sees the same writes", async () => {
    const { box } = await create();
    // As a busybox find answers: the -printf test fails, so the shell loop lists the entries.
    const busybox: SandboxHandle = {
      ...box,
      exec: (req) =>
        box.exec({
          ...req,
          argv: req.argv.map((a) =>
            a.replace("-maxdepth 0 -printf ''", "-maxdepth 0 -no-such-test"),
          ),
        }),
    };
    const before = await scanRunnerTrees(busybox);
    assert.ok(
      before?.has("node_modules/eslint/bin/eslint.js"),
      JSON.stringify([...(before ?? [])]),
    );
    assert.deepEqual(treeChanges(before, await scanRunnerTrees(busybox)), [], "nothing changed");
    await sh(box, "printf 'x' > node_modules/eslint/bin/eslint.js && touch node_modules/new.js");
    // Digests stand in for ctime there: a directory lists no change, its new entry does.
    assert.deepEqual(treeChanges(before, await scanRunnerTrees(busybox)).sort(), [
      "node_modules/eslint/bin/eslint.js",
      "node_modules/new.js",
    ]);
  });
});
