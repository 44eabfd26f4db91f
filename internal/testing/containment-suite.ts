/**
 * The set-up every secret-containment test file shares: a real stack (agentd server on a
 * private redis-server), the Docker test sandbox and a containment kernel, started in
 * `before` and stopped in `after` of the calling file. Fields are set once `before` ran.
 * Must never: fake the sandbox, the kernel or the log.
 */
import { after, before } from "node:test";
import type { CallOutcome, Kernel } from "../kernel/kernel.ts";
import type { Sandbox } from "../sandbox/port.ts";
import { type Stack, startStack } from "./api-fixtures.ts";
import { containmentKernel } from "./containment-run.ts";
import { testSandbox } from "./docker.ts";

export interface ContainmentSuite {
  stack: Stack;
  sandbox: Sandbox;
  kernel: Kernel;
}

/** Registers the file's before/after hooks; read the fields inside tests only. */
export function containmentSuite(): ContainmentSuite {
  const s = {} as ContainmentSuite;
  let cleanup: (() => Promise<void>) | undefined;
  before(async () => {
    s.stack = await startStack();
    const t = await testSandbox();
    s.sandbox = t.sandbox;
    cleanup = t.cleanup;
    s.kernel = containmentKernel(s.stack);
  });
  after(async () => {
    await cleanup?.();
    await s.stack?.stop();
  });
  return s;
}

/** A call that ran and exited 0. */
export const exitOk = (r: CallOutcome): boolean =>
  r.kind === "result" && r.ok && (r.output as { exitCode?: number }).exitCode === 0;
