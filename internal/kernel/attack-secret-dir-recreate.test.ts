/**
 * ATTACK (review of issue #27, secret containment): a directory a secret-carrying call
 * removes and makes again is invisible to the scans (a directory's digest is its mode and
 * owner; its times are reset), but its inode number (and its place in the parent's listing)
 * is new. A person approves one call that recreates the directories whose bit of the secret
 * is 1; a later call no person approved reads the bits back with `stat -c %i`.
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

describe("attack: directories recreated by a secret call carry its bits", () => {
  it("a later unapproved call cannot read the secret from directory inode numbers", async () => {
    const f = await freshRun();
    const names = [...Array(32).keys()].map((i) => `c/b${i}`);
    // Before any secret: 32 empty directories, then a marker made after them.
    const prep = await f.unapproved("process.run", {
      command: `mkdir c ${names.join(" ")} c/m`,
    });
    assert.equal(exitOk(prep), true, JSON.stringify(prep));
    // The approved call: an ordinary-looking setup step that touches no file.
    const w = await f.approved("process.run", {
      command:
        'cd c; i=0; for v in $(printf %s "$ENV.DEMO_TOKEN" | od -An -tu1 -N4); do j=0; while [ $j -lt 8 ]; do [ $(( (v >> j) & 1 )) = 1 ] && { rmdir b$((i*8+j)) && mkdir b$((i*8+j)); }; j=$((j+1)); done; i=$((i+1)); done; true',
    });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    const r = await f.unapproved("process.run", {
      command: `stat -c %i c/m ${names.join(" ")}`,
    });
    const [m = 0, ...inodes] = stdout(r).trim().split("\n").map(Number);
    const bits = inodes.map((i) => (i > m ? "1" : "0")).join("");
    const bytes = [0, 1, 2, 3].map((i) =>
      [...bits.slice(i * 8, i * 8 + 8)].reduce((a, b, j) => a | (b === "1" ? 1 << j : 0), 0),
    );
    const decoded = Buffer.from(bytes).toString("latin1");
    assert.notEqual(
      decoded,
      SECRET.slice(0, 4),
      `secret prefix leaked to an unapproved call (kind=${r.kind}, held=${JSON.stringify(held(f))}, bits=${bits})`,
    );
    assert.equal(r.kind, "paused", `unapproved read ran: ${JSON.stringify(r).slice(0, 300)}`);
  });
});
