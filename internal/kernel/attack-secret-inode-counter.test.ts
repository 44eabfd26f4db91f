/**
 * ATTACK (review of issue #27, secret containment): a tmpfs hands out inode numbers in
 * order and never gives one back. A secret-carrying call that makes and removes N files
 * leaves nothing for the scans to see (no entry before or after it), yet the next file made
 * on that tmpfs has an inode number N higher. A person approves one such call; a later call
 * no person approved reads a byte of the secret from `stat -c %i`.
 *
 * Must never: fake the sandbox, the kernel or the log (real Docker, real Redis).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { RunStartedSchema } from "../gen/agentd/v1/events_pb.js";
import type { Sandbox, SandboxHandle } from "../sandbox/port.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { type Stack, startStack } from "../testing/api-fixtures.ts";
import { sandboxImage, TEST_LIMITS, testSandbox } from "../testing/docker.ts";
import { type CallOutcome, createKernel, type Kernel, type KernelRun } from "./kernel.ts";
import { parsePolicy } from "./policy-loader.ts";
import type { Policy } from "./policy-schema.ts";
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
const stdout = (r: CallOutcome): string =>
  r.kind === "result" ? String((r.output as { stdout?: string }).stdout ?? "") : "";
const held = (f: Fresh): string[] => [...(f.run.taint?.keys() ?? [])].sort();

describe("attack: a tmpfs inode counter advanced by a secret call carries it", () => {
  it("a later unapproved call cannot read a byte of the secret from the next inode number", async () => {
    const f = await freshRun();
    const a = await f.unapproved("process.run", {
      command: "touch /dev/shm/r1 && stat -c %i /dev/shm/r1",
    });
    assert.equal(exitOk(a), true, JSON.stringify(a));
    // The approved call: makes and removes as many files as the secret's first byte.
    const w = await f.approved("process.run", {
      command:
        'v=$(printf %s "$ENV.DEMO_TOKEN" | od -An -tu1 -N1); n=0; while [ $n -lt $v ]; do : > /dev/shm/x; rm /dev/shm/x; n=$((n+1)); done',
    });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    const r = await f.unapproved("process.run", {
      command: "touch /dev/shm/r2 && stat -c %i /dev/shm/r2",
    });
    const got = Number(stdout(r).trim()) - Number(stdout(a).trim()) - 1;
    assert.notEqual(
      got,
      SECRET.charCodeAt(0),
      `the secret's first byte leaked to an unapproved call (kind=${r.kind}, held=${JSON.stringify(held(f))})`,
    );
    assert.equal(r.kind, "paused", `unapproved read ran: ${JSON.stringify(r).slice(0, 300)}`);
  });
});
