/**
 * Test fixture for secret containment: the repository's policy.yaml made as permissive as
 * commands can be (so nothing but containment makes an exec ask), a kernel that knows one
 * secret, and a started run with a real sandbox holding hello.txt, with the three ways a
 * test drives it (a call a person approves, one nobody approves, a raw shell in the box).
 * Test-only: it must never be imported by product code.
 */
import { readFileSync } from "node:fs";
import { create } from "@bufbuild/protobuf";
import { RunStartedSchema } from "../gen/agentd/v1/events_pb.js";
import { type CallOutcome, createKernel, type Kernel, type KernelRun } from "../kernel/kernel.ts";
import { parsePolicy } from "../kernel/policy-loader.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import { taintOf } from "../kernel/secret-taint.ts";
import { createEnvSecretProvider } from "../kernel/secrets.ts";
import type { Sandbox, SandboxHandle } from "../sandbox/port.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import type { Stack } from "./api-fixtures.ts";
import { sandboxImage, TEST_LIMITS } from "./docker.ts";

export const SECRET = "tok3n-Containment-Value-97531";

/** policy.yaml with DEMO_TOKEN allowed as a secret and approvals that wait an hour. */
export function containmentPolicy(): Policy {
  const parsed = parsePolicy(
    readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8"),
    "policy.yaml",
  );
  if (!parsed.ok) throw new Error("policy.yaml does not parse");
  return {
    ...parsed.policy,
    secrets: { allow: ["DEMO_TOKEN"], providers: [{ type: "env" }] },
    approvals: { expireAfter: 60 * 60_000 },
  };
}

/** A kernel over the stack's log that resolves $ENV.DEMO_TOKEN to SECRET. */
export function containmentKernel(stack: Stack, policy: Policy = containmentPolicy()): Kernel {
  return createKernel({
    log: stack.log,
    policy: () => policy,
    secretProviders: [createEnvSecretProvider({ DEMO_TOKEN: SECRET })],
  });
}

export interface ContainmentRun {
  run: KernelRun;
  box: SandboxHandle;
  approved: (tool: string, input: unknown) => Promise<CallOutcome>;
  unapproved: (tool: string, input: unknown) => Promise<CallOutcome>;
  sh: (command: string) => ReturnType<SandboxHandle["exec"]>;
}

export interface RunOptions {
  image?: string;
  /** The image is a run's own (bring-your-own image), not agentd's. */
  userImage?: boolean;
  prompt?: string;
}

let calls = 0;

/** A started run of its own with a sandbox holding hello.txt. */
export async function containmentRun(
  stack: Stack,
  sandbox: Sandbox,
  kernel: Kernel,
  opts: RunOptions = {},
): Promise<ContainmentRun> {
  const created = await stack.client.createRun({
    prompt: opts.prompt ?? "containment",
    labels: { repo: "acme-app" },
  });
  const runId = created.run?.runId as string;
  const sessionId = created.run?.sessionId as string;
  const box = await sandbox.create({
    runId,
    tenantId: "acme",
    image: opts.image ?? sandboxImage("test"),
    ...(opts.userImage === true ? { userImage: true } : {}),
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
    // A call a person approves (handle pauses, then the approval runs it).
    approved: async (tool, input) => {
      const call = { callId: `a${++calls}`, tool, input };
      const first = await kernel.handle(run, call);
      if (first.kind !== "paused") return first;
      return kernel.continueAfterApproval(run, call, { approved: true, reason: "" });
    },
    unapproved: (tool, input) => kernel.handle(run, { callId: `u${++calls}`, tool, input }),
    sh: (command) =>
      box.exec({ argv: ["sh", "-c", command], timeoutMs: 30_000, maxOutputBytes: 1 << 20 }),
  };
}

/**
 * Whether the run holds a secret in `path` (clear): names a secret-carrying call made are
 * keyed in the taint (kernel/held-names.ts), so tests ask through the run's key.
 */
export function holds(run: KernelRun, path: string): boolean {
  if (run.taint === undefined || run.nameKey === undefined) return false;
  return taintOf(run.taint, path, run.nameKey)?.path !== undefined;
}

/** Whether `path` itself (not an ancestor) is recorded by a keyed name, never in clear. */
export function holdsByName(run: KernelRun, path: string): boolean {
  if (run.taint === undefined || run.nameKey === undefined) return false;
  const f = taintOf(run.taint, path, run.nameKey);
  return (f?.path.includes("//") ?? false) && !run.taint.has(path);
}
