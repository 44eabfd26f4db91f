/**
 * A paused run's workspace snapshot and the run's secret taint, against real parts (the
 * kernel, a real Redis log, real containers, a real artifact store): the snapshot leaves out
 * every path the run holds a secret in (a file, a directory's whole tree, a hard link made
 * with it), keeps the rest, and a new container made from it — as a resume after a pause
 * and a sandbox-lost recovery both make one (drive-start.ts) — holds none of those paths:
 * the next scan ends a held file's taint (it is gone), a path held as unknown or as removed
 * stays held, and no later call reads a held file's bytes without a person.
 *
 * Must never: fake the sandbox, the kernel, the log or the artifact store.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import * as tarStream from "tar-stream";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { RunStartedSchema } from "../gen/agentd/v1/events_pb.js";
import { type NameKey, nameKey } from "../kernel/held-names.ts";
import { type CallOutcome, createKernel, type Kernel, type KernelRun } from "../kernel/kernel.ts";
import { parsePolicy } from "../kernel/policy-loader.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import { createRunSecrets } from "../kernel/run-secrets.ts";
import { CONTAINMENT_RULE } from "../kernel/secret-containment.ts";
import { refreshTaint, taintFromEvents } from "../kernel/secret-taint.ts";
import { createEnvSecretProvider } from "../kernel/secrets.ts";
import type { Sandbox, SandboxHandle } from "../sandbox/port.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { type Stack, startStack } from "../testing/api-fixtures.ts";
import { holds } from "../testing/containment-run.ts";
import { sandboxImage, TEST_LIMITS, testSandbox } from "../testing/docker.ts";
import { snapshotWorkspace } from "./workspace-snapshot.ts";

const SECRET = "snapSecret-Value-24680-Qx";
const REVERSED = [...SECRET].reverse().join("");

const parsed = parsePolicy(
  readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8"),
  "policy.yaml",
);
if (!parsed.ok) throw new Error("policy.yaml does not parse");
const policy: Policy = {
  ...parsed.policy,
  secrets: { allow: ["DEMO_TOKEN"], providers: [{ type: "env" }] },
  approvals: { expireAfter: 60 * 60_000 },
};

let stack: Stack;
let sandbox: Sandbox;
let cleanupBoxes: () => Promise<void>;
let kernel: Kernel;
let dir: string;
let store: FsArtifactStore;
let n = 0;

before(async () => {
  stack = await startStack();
  const t = await testSandbox();
  sandbox = t.sandbox;
  cleanupBoxes = t.cleanup;
  kernel = createKernel({
    log: stack.log,
    policy: () => policy,
    secretProviders: [createEnvSecretProvider({ DEMO_TOKEN: SECRET })],
  });
  dir = mkdtempSync(join(tmpdir(), "agentd-snap-held-"));
  store = new FsArtifactStore(dir);
});

after(async () => {
  await cleanupBoxes?.();
  await stack?.stop();
  rmSync(dir, { recursive: true, force: true });
});

interface Fresh {
  runId: string;
  run: KernelRun;
  box: SandboxHandle;
  approved: (tool: string, input: unknown) => Promise<CallOutcome>;
}

const FILES = [
  { path: "hello.txt", type: "file" as const, mode: 0o644, data: Buffer.from("hello\n") },
  { path: "setup.cfg", type: "file" as const, mode: 0o644, data: Buffer.from("[base]\n") },
];

async function newRun(): Promise<{ runId: string; sessionId: string; fence: number }> {
  const created = await stack.client.createRun({ prompt: "snap", labels: { repo: "acme-app" } });
  const runId = created.run?.runId as string;
  const sessionId = created.run?.sessionId as string;
  const fence = await stack.log.bumpEpoch(runId);
  await stack.log.append({
    runId,
    sessionId,
    fence,
    payload: {
      case: "runStarted",
      value: create(RunStartedSchema, { workerId: "test", epoch: BigInt(fence) }),
    },
  });
  return { runId, sessionId, fence };
}

/** A kernel run over `box` (its taint as the log records it, as a drive derives it). */
async function kernelRun(
  ids: { runId: string; sessionId: string; fence: number },
  box: SandboxHandle,
): Promise<Fresh> {
  const events = (await stack.log.read(ids.runId, 0)).map((e) => e.event);
  const run: KernelRun = {
    ...ids,
    sandbox: box,
    taint: taintFromEvents(events),
    nameKey: nameKey(await stack.log.runNameKey(ids.runId)),
  };
  return {
    runId: ids.runId,
    run,
    box,
    approved: async (tool, input) => {
      const call = { callId: `s${++n}`, tool, input };
      const first = await kernel.handle(run, call);
      if (first.kind !== "paused") return first;
      return kernel.continueAfterApproval(run, call, { approved: true, reason: "" });
    },
  };
}

async function freshRun(): Promise<Fresh> {
  const ids = await newRun();
  const box = await sandbox.create({
    runId: ids.runId,
    tenantId: "acme",
    image: sandboxImage("test"),
    limits: TEST_LIMITS,
    network: "none",
    workspaceTar: await packWorkspace(FILES),
  });
  return kernelRun(ids, box);
}

const key = (f: Fresh): NameKey => f.run.nameKey as NameKey;

/** The paused run's snapshot, then a new container from it (as a resume or a recovery makes). */
async function pauseAndRestore(f: Fresh): Promise<{ entries: Map<string, string>; next: Fresh }> {
  await f.box.killAll();
  const info = await snapshotWorkspace(
    store,
    f.box,
    createRunSecrets([SECRET]),
    f.run.taint ?? new Map(),
    f.run.nameKey,
  );
  const entries = await tarEntries(info.digest);
  await f.box.destroy();
  const box = await sandbox.create({
    runId: f.runId,
    tenantId: "acme",
    image: sandboxImage("test"),
    limits: TEST_LIMITS,
    network: "none",
    workspace: { size: info.size, open: () => store.read(info.digest) },
  });
  const next = await kernelRun(
    { runId: f.runId, sessionId: f.run.sessionId, fence: f.run.fence },
    box,
  );
  return { entries, next };
}

/** Entry name → content (files) or type (the rest). */
async function tarEntries(digest: string): Promise<Map<string, string>> {
  const chunks: Buffer[] = [];
  for await (const c of store.read(digest)) chunks.push(Buffer.from(c));
  const out = new Map<string, string>();
  const extract = tarStream.extract();
  const done = new Promise<void>((resolve, reject) => {
    extract.on("entry", (h, stream, next) => {
      const parts: Buffer[] = [];
      stream.on("data", (c: unknown) => parts.push(c as Buffer));
      stream.on("end", () => {
        out.set(
          h.name.replace(/\/$/, ""),
          h.type === "file" ? Buffer.concat(parts).toString("latin1") : String(h.type),
        );
        next();
      });
    });
    extract.on("finish", resolve);
    extract.on("error", reject);
  });
  extract.end(Buffer.concat(chunks));
  await done;
  return out;
}

const exitOk = (r: CallOutcome): boolean =>
  r.kind === "result" && r.ok && (r.output as { exitCode?: number }).exitCode === 0;

async function sh(box: SandboxHandle, command: string): Promise<string> {
  const r = await box.exec({
    argv: ["sh", "-c", command],
    timeoutMs: 60_000,
    maxOutputBytes: 1 << 20,
  });
  return r.stdout;
}

describe("a workspace snapshot leaves out the paths the run holds a secret in", () => {
  it("a held file, a held directory's tree and a hard link to a held file are left out; the rest is kept; restored, they are absent and their taints end", async () => {
    const f = await freshRun();
    const w = await f.approved("process.run", {
      command:
        'printf %s "$ENV.DEMO_TOKEN" | rev > /workspace/setup.cfg && mkdir -p /workspace/keys/deep && printf %s "$ENV.DEMO_TOKEN" | rev > /workspace/keys/deep/k && ln /workspace/setup.cfg /workspace/twin',
    });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    // A file written later by a call that carried no secret: not held, kept.
    const plain = await f.approved("repo.patch", {
      path: "notes.md",
      unifiedDiff: "--- /dev/null\n+++ b/notes.md\n@@ -0,0 +1 @@\n+plain notes\n",
    });
    assert.equal(plain.kind === "result" && plain.ok, true, JSON.stringify(plain));
    const heldBefore = [...(f.run.taint?.keys() ?? [])];
    for (const p of ["/workspace/setup.cfg", "/workspace/keys", "/workspace/twin"])
      assert.ok(holds(f.run, p), `${p} held: ${heldBefore.join(", ")}`);

    const { entries, next } = await pauseAndRestore(f);
    const names = [...entries.keys()].sort();
    for (const p of ["setup.cfg", "keys", "keys/deep", "keys/deep/k", "twin"])
      assert.equal(entries.has(p), false, `${p} left out: ${names.join(", ")}`);
    assert.equal(entries.get("hello.txt"), "hello\n", names.join(", "));
    assert.equal(entries.get("notes.md"), "plain notes\n", names.join(", "));
    const all = [...entries.values()].join("\n");
    assert.equal(all.includes(REVERSED), false, "no held bytes in the snapshot");

    // The new container: the held paths are absent, the rest is there.
    const ls = await sh(next.box, "cd /workspace && ls -A");
    assert.deepEqual(ls.trim().split("\n").sort(), ["hello.txt", "notes.md"], ls);
    // The log still holds them; the first scan finds them gone and ends their taints.
    const held = next.run.taint as Map<string, unknown>;
    assert.ok(holds(next.run, "/workspace/setup.cfg"), "the taker's taint comes from the log");
    await refreshTaint(next.run.taint ?? new Map(), next.box, key(next));
    for (const p of ["/workspace/setup.cfg", "/workspace/keys", "/workspace/twin"])
      assert.equal(holds(next.run, p), false, `${p}'s taint ended: it is gone`);
    // The container itself stays held (an exec carried the secret): no scan ends that.
    assert.ok(held.has("container:"), [...held.keys()].join(", "));
  });

  it("a workspace held as unknown (a failed scan) leaves every workspace file out, and stays held after the restore", async () => {
    const ids = await newRun();
    const box = await sandbox.create({
      runId: ids.runId,
      tenantId: "acme",
      image: sandboxImage("test"),
      limits: TEST_LIMITS,
      network: "none",
      workspaceTar: await packWorkspace(FILES),
    });
    const f = await kernelRun(ids, box);
    // What a secret call's first record leaves when its worker is cut off: every root unknown.
    f.run.taint?.set("/workspace", {
      path: "/workspace",
      digest: "unknown",
      before: "",
      callId: "x1",
    });
    const { entries, next } = await pauseAndRestore(f);
    assert.deepEqual(
      [...entries.entries()].filter(([, v]) => v === "file"),
      [],
      "no file in the snapshot",
    );
    assert.equal(entries.has("hello.txt"), false);
    next.run.taint?.set("/workspace", {
      path: "/workspace",
      digest: "unknown",
      before: "",
      callId: "x1",
    });
    await refreshTaint(next.run.taint ?? new Map(), next.box, key(next));
    assert.ok(next.run.taint?.has("/workspace"), "unknown is never ended by a scan");
    // A later read of the workspace still waits for a person.
    const r = await kernel.handle(next.run, {
      callId: `s${++n}`,
      tool: "repo.read",
      input: { path: "hello.txt" },
    });
    assert.equal(r.kind, "paused", JSON.stringify(r));
  });

  it("a path a secret call removed stays held after the restore (absent is not as before)", async () => {
    const f = await freshRun();
    const w = await f.approved("process.run", {
      command: 'test -n "$ENV.DEMO_TOKEN" && rm /workspace/hello.txt',
    });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    // Held by its keyed name (which existing file a secret call removed is the program's choice).
    assert.equal(f.run.taint?.has("/workspace/hello.txt"), false, "a removed path in clear");
    assert.ok(holds(f.run, "/workspace/hello.txt"));
    const { entries, next } = await pauseAndRestore(f);
    assert.equal(entries.has("hello.txt"), false);
    assert.equal(entries.get("setup.cfg"), "[base]\n", "an unheld uploaded file is kept");
    await refreshTaint(next.run.taint ?? new Map(), next.box, key(next));
    assert.ok(holds(next.run, "/workspace/hello.txt"), "absent is not as before: still held");
    const r = await kernel.handle(next.run, {
      callId: `s${++n}`,
      tool: "repo.search",
      input: { query: "base" },
    });
    assert.equal(r.kind, "paused", "a workspace read still asks while a path is held");
    const asked = (await stack.log.read(f.runId, 0))
      .map((e) => e.event.payload)
      .filter((p) => p.case === "policyDecision")
      .at(-1);
    assert.equal(asked?.case === "policyDecision" && asked.value.rule, CONTAINMENT_RULE);
  });
});
