/**
 * ATTACK (review of issue #27, secret containment): the workspace snapshot a paused run
 * leaves as an artifact masks the run's secret values as written (secret-mask.ts) but keeps
 * the files the run holds a secret in: a file an approved secret call wrote the secret into,
 * with its letters shifted by a key the model chose (no form a mask can know), is stored in the snapshot artifact in clear (the final patch withholds
 * that same file). A run holding a taint pauses exactly when its next call asks a person,
 * so every such run whose approval outlasts the hold stores one.
 *
 * Must never: fake the sandbox, the kernel, the log or the artifact store.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { RunStartedSchema } from "../gen/agentd/v1/events_pb.js";
import type { Sandbox, SandboxHandle } from "../sandbox/port.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { type Stack, startStack } from "../testing/api-fixtures.ts";
import { holds } from "../testing/containment-run.ts";
import { sandboxImage, TEST_LIMITS, testSandbox } from "../testing/docker.ts";
import { snapshotWorkspace } from "../worker/workspace-snapshot.ts";
import { type CallOutcome, createKernel, type Kernel, type KernelRun } from "./kernel.ts";
import { parsePolicy } from "./policy-loader.ts";
import type { Policy } from "./policy-schema.ts";
import { createRunSecrets } from "./run-secrets.ts";
import { createEnvSecretProvider } from "./secrets.ts";

const SECRET = "tok3n-Containment-Value-97531";

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
let n = 0;

interface Fresh {
  run: KernelRun;
  box: SandboxHandle;
  approved: (tool: string, input: unknown) => Promise<CallOutcome>;
  unapproved: (tool: string, input: unknown) => Promise<CallOutcome>;
  sh: (command: string) => ReturnType<SandboxHandle["exec"]>;
}

/** A run of its own (real kernel, real Redis log) with a sandbox of `image`. */
async function freshRun(image = sandboxImage("test")): Promise<Fresh> {
  const created = await stack.client.createRun({ prompt: "attack", labels: { repo: "acme-app" } });
  const runId = created.run?.runId as string;
  const sessionId = created.run?.sessionId as string;
  const box = await sandbox.create({
    runId,
    tenantId: "acme",
    image,
    limits: TEST_LIMITS,
    network: "none",
    workspaceTar: await packWorkspace([
      { path: "hello.txt", type: "file", mode: 0o644, data: Buffer.from("hello\n") },
    ]),
  });
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
  const run: KernelRun = { runId, sessionId, fence, sandbox: box, taint: new Map() };
  return {
    run,
    box,
    approved: async (tool, input) => {
      const call = { callId: `a${++n}`, tool, input };
      const first = await kernel.handle(run, call);
      if (first.kind !== "paused") return first;
      return kernel.continueAfterApproval(run, call, { approved: true, reason: "" });
    },
    unapproved: (tool, input) => kernel.handle(run, { callId: `u${++n}`, tool, input }),
    sh: (command) =>
      box.exec({ argv: ["sh", "-c", command], timeoutMs: 60_000, maxOutputBytes: 1 << 20 }),
  };
}

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
});

after(async () => {
  await cleanupBoxes?.();
  await stack?.stop();
});

const exitOk = (r: CallOutcome): boolean =>
  r.kind === "result" && r.ok && (r.output as { exitCode?: number }).exitCode === 0;
const held = (f: Fresh): string[] => [...(f.run.taint?.keys() ?? [])].sort();

/** SECRET through `tr 0-9a-zA-Z 5-90-4k-za-jK-ZA-J`: digits +5, letters +10 (mod their range). */
const shifted = [...SECRET]
  .map((c) => {
    const rot = (base: string, n: number, by: number) =>
      String.fromCharCode(((c.charCodeAt(0) - base.charCodeAt(0) + by) % n) + base.charCodeAt(0));
    if (/[0-9]/.test(c)) return rot("0", 10, 5);
    if (/[a-z]/.test(c)) return rot("a", 26, 10);
    if (/[A-Z]/.test(c)) return rot("A", 26, 10);
    return c;
  })
  .join("");

describe("attack: the pause snapshot keeps a file the run holds a secret in", () => {
  it("the secret shifted by a model-chosen key, written by an approved call is not in the snapshot artifact", async () => {
    const f = await freshRun();
    const w = await f.approved("process.run", {
      command:
        'printf %s "$ENV.DEMO_TOKEN" | tr 0-9a-zA-Z 5-90-4k-za-jK-ZA-J > /workspace/setup.cfg',
    });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    assert.equal(holds(f.run, "/workspace/setup.cfg"), true, JSON.stringify(held(f)));
    const dir = mkdtempSync(join(tmpdir(), "agentd-attack-snap-"));
    try {
      const store = new FsArtifactStore(dir);
      const info = await snapshotWorkspace(
        store,
        f.box,
        createRunSecrets([SECRET]),
        f.run.taint ?? new Map(),
        f.run.nameKey,
      );
      const chunks: Buffer[] = [];
      for await (const c of store.read(info.digest)) chunks.push(Buffer.from(c));
      const tar = Buffer.concat(chunks).toString("latin1");
      assert.equal(tar.includes(SECRET), false, "the literal value is masked");
      assert.equal(
        tar.includes(shifted),
        false,
        "the snapshot artifact holds the secret (letters shifted by a key the model chose), from a file the run holds a secret in",
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
