/**
 * ATTACK (review of issue #27, secret containment): the path of a file a secret-carrying
 * call makes is recorded as it is in the log (`secret.written`) and shown in every later
 * preview. A person approves a call that makes a file in /tmp whose NAME is the secret
 * reversed (no known form of it); the event log, and the preview of the next call, carry the
 * secret in a form one `rev` turns back. (docs/policy.md lists "names of tainted paths" as a
 * residual; the issue asks that the value reach neither the log nor the model.)
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
const held = (f: Fresh): string[] => [...(f.run.taint?.keys() ?? [])].sort();

const reversed = [...SECRET].reverse().join("");

describe("attack: a secret spelled by a tainted path's name", () => {
  it("the event log never holds the secret reversed after a call that names a file with it", async () => {
    const f = await freshRun();
    const w = await f.approved("process.run", {
      command: 'touch "/tmp/$(printf %s "$ENV.DEMO_TOKEN" | rev)"',
    });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    assert.equal(held(f).length > 0, true, "the call's file is held");
    const next = await f.unapproved("process.run", { command: "ls /workspace" });
    assert.equal(
      JSON.stringify(next).includes(reversed),
      false,
      `the later call's preview spells the secret reversed: ${JSON.stringify(next).slice(0, 400)}`,
    );
    const log = (await stack.log.read(f.run.runId, 0)).map((e) => e.json).join("\n");
    assert.equal(log.includes(reversed), false, "the event log holds the secret reversed");
  });
});
