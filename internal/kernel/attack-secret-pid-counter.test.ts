/**
 * ATTACK (review of issue #27, secret containment): PIDs are handed out in order in the
 * sandbox's PID namespace. A secret-carrying call that forks N short-lived processes leaves
 * nothing for the scans to see (they are all gone), yet the next process gets a PID about N
 * higher. Calibrated by a secret call that forks nothing, a later call no person approved
 * reads a byte of the secret from /proc/self/stat.
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

const pidOf = (r: CallOutcome): number => Number(stdout(r).trim().split(" ")[0]);

describe("attack: the PID counter advanced by a secret call carries it", () => {
  it("a later unapproved call cannot read a byte of the secret from its own PID", async () => {
    const f = await freshRun();
    const probe = () => f.unapproved("process.run", { command: "cat /proc/self/stat" });
    const fork = (count: string) =>
      `v=$(printf %s "$ENV.DEMO_TOKEN" | od -An -tu1 -N1); n=0; while [ $n -lt ${count} ]; do /bin/true; n=$((n+1)); done`;
    // Calibration: the same secret call forking nothing, between two probes.
    const p0 = await probe();
    assert.equal(exitOk(p0), true, JSON.stringify(p0));
    const c = await f.approved("process.run", { command: fork("0") });
    assert.equal(exitOk(c), true, JSON.stringify(c));
    const p1 = await probe();
    assert.equal(exitOk(p1), true, JSON.stringify(p1));
    // The approved call: forks as many processes as the secret's first byte.
    const w = await f.approved("process.run", { command: fork("$v") });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    const p2 = await probe();
    const got = pidOf(p2) - pidOf(p1) - (pidOf(p1) - pidOf(p0));
    const want = SECRET.charCodeAt(0);
    assert.equal(
      Math.abs(got - want) <= 2,
      false,
      `the secret's first byte (${want}) leaked to an unapproved call as ${got} (kind=${p2.kind}, held=${JSON.stringify(held(f))})`,
    );
    assert.equal(p2.kind, "paused", `unapproved read ran: ${JSON.stringify(p2).slice(0, 300)}`);
  });
});
