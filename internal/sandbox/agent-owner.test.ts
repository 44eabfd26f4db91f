/**
 * The newest agent owns the container (agent.c claim_container): a worker that takes a run
 * over starts a second agent while the old owner's agent lives on (its worker frozen past
 * the lease, then woken). Whatever the old agent does on its own — its pipe closes, its
 * last call ends — must not kill the new owner's calls. Real engine, busybox test image.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { isAgentdError } from "../errors.ts";
import { testBoxSpec, testSandbox } from "../testing/docker.ts";
import type { ExecRequest, Sandbox, SandboxHandle } from "./port.ts";

let sandbox: Sandbox;
let cleanup: () => Promise<void>;

const run = (h: SandboxHandle, cmd: string, extra: Partial<ExecRequest> = {}) =>
  h.exec({ argv: ["sh", "-c", cmd], timeoutMs: 30_000, maxOutputBytes: 64 * 1024, ...extra });

before(async () => {
  ({ sandbox, cleanup } = await testSandbox());
});
after(async () => {
  await cleanup();
});

/** The first owner's handle and a second owner's, whose agent is already started. */
async function twoOwners(): Promise<{ old: SandboxHandle; found: SandboxHandle }> {
  const old = await sandbox.create(testBoxSpec());
  await run(old, "true");
  const found = await sandbox.find(old.runId);
  assert.ok(found !== undefined);
  assert.equal((await run(found, "id -u")).stdout, "1000\n", "the second agent runs calls");
  return { old, found };
}

/** Resolves once `file` exists in the workspace (the call has begun). */
async function begun(h: SandboxHandle, file: string): Promise<void> {
  for (;;) {
    if ((await run(h, `test -e ${file}`)).exitCode === 0) return;
    await new Promise((r) => setTimeout(r, 50));
  }
}

it("the old owner's pipe closing does not kill the new owner's call", async () => {
  const { old, found } = await twoOwners();
  try {
    const call = run(found, ": > started; sleep 2; echo survived");
    await begun(found, "started");
    old.detach?.(); // the old agent sees its pipe close: it kills its own calls, no others
    const r = await call;
    assert.deepEqual([r.exitCode, r.stdout], [0, "survived\n"]);
  } finally {
    await found.destroy();
  }
});

it("the old owner's last call ending does not kill the new owner's call", async () => {
  const { old, found } = await twoOwners();
  try {
    const oldCall = run(old, "sleep 1");
    const call = run(found, ": > started; sleep 3; echo survived");
    await begun(found, "started");
    assert.equal((await oldCall).exitCode, 0); // it ended alone in its agent: no kill-all
    const r = await call;
    assert.deepEqual([r.exitCode, r.stdout], [0, "survived\n"]);
    old.detach?.();
  } finally {
    await found.destroy();
  }
});

it("the old owner's kill-all is refused (fenced) and kills nothing of the new owner's", async () => {
  const { old, found } = await twoOwners();
  try {
    const call = run(found, ": > started; sleep 2; echo survived");
    await begun(found, "started");
    await run(old, "true"); // a call of its own since the takeover: its handle is not quiet
    await assert.rejects(old.killAll(), (err) => {
      assert.ok(isAgentdError(err, "EFENCED"), String(err));
      assert.match(err.message, /another worker owns this run's sandbox now/);
      return true;
    });
    const r = await call;
    assert.deepEqual([r.exitCode, r.stdout], [0, "survived\n"]);
    await found.killAll(); // the owner's own is obeyed
    old.detach?.();
  } finally {
    await found.destroy();
  }
});

it("the new owner's own call ending alone still kills what it left running", async () => {
  const { old, found } = await twoOwners();
  try {
    old.detach?.();
    await run(found, "(setsid sh -c 'sleep 60' &) ; true");
    const left = await run(found, "ps -o user,args | grep -c '[s]leep 60' || true");
    assert.equal(left.stdout.trim(), "0", "nothing the call started outlives it");
  } finally {
    await found.destroy();
  }
});

it("the ownership record is root's: the sandbox user can neither read nor rewrite it", async () => {
  const { old, found } = await twoOwners();
  try {
    const r = await run(found, "echo 1 > /tmp/.agentd-root/owner; ls /tmp/.agentd-root");
    assert.notEqual(r.exitCode, 0);
    assert.match(r.stderr, /Permission denied/);
    const mv = await run(found, "mv /tmp/.agentd-root /tmp/x 2>&1; rm -rf /tmp/.agentd-root 2>&1");
    assert.match(mv.stdout, /not permitted|Permission denied/);
    old.detach?.();
    const call = run(found, ": > started; sleep 1; echo survived");
    await begun(found, "started");
    assert.equal((await call).stdout, "survived\n");
  } finally {
    await found.destroy();
  }
});
