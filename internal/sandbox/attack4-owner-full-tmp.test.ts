/**
 * Attack: the sandbox user fills /tmp (its tmpfs, mode 1777, size-limited) before a
 * takeover. The new owner's agent then cannot write its pid (claim_container in
 * sandbox-images/agent/agent.c: the write of `owner.PID` fails with ENOSPC, the function
 * returns with owner_dir = -1), so the record keeps naming the OLD agent. owns_container()
 * answers 1 in both agents: the new one because it has no owner_dir, the old one because
 * the record still names it. When the old owner's pipe closes (its worker, frozen past the
 * lease, wakes and lets go) its agent kills every process of the sandbox user: the new
 * owner's call dies. A run's process chooses this on purpose; it needs nothing but `dd`.
 *
 * What must hold (agent.c header; issue 27 review brief): "every process of the sandbox
 * user is killed ... by the agent that owns the container (the newest: see
 * claim_container), never by an old owner's agent, whose worker lost the run while a new
 * owner's calls run". A claim that cannot be written must not leave the old agent believing
 * it still owns (e.g. remove/replace the record by rename of a pre-made file, write the
 * pid before any sandbox code runs, or have an agent that cannot claim refuse to start).
 * Real engine, busybox test image.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
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

async function begun(h: SandboxHandle, file: string): Promise<void> {
  for (;;) {
    if ((await run(h, `test -e ${file}`)).exitCode === 0) return;
    await new Promise((r) => setTimeout(r, 50));
  }
}

it("a /tmp filled by the sandbox user before a takeover lets the old owner's agent kill the new owner's call", async () => {
  const old = await sandbox.create(testBoxSpec());
  let found: SandboxHandle | undefined;
  try {
    // The run's own call, before the takeover: fill /tmp to the last byte.
    const fill = await run(
      old,
      "dd if=/dev/zero of=/tmp/fill bs=64k 2>/dev/null; df /tmp | tail -1",
    );
    assert.match(fill.stdout, /100%/, "the sandbox user can fill /tmp");
    found = await sandbox.find(old.runId);
    assert.ok(found !== undefined, "the takeover finds the container");
    assert.equal((await run(found, "id -u")).stdout, "1000\n", "the new agent runs calls");
    const call = run(found, ": > started; sleep 2; echo survived");
    await begun(found, "started");
    old.detach?.(); // the old owner's pipe closes
    const r = await call;
    assert.deepEqual(
      [r.exitCode, r.stdout],
      [0, "survived\n"],
      "the old owner's agent killed the new owner's call",
    );
  } finally {
    await (found ?? old).destroy();
  }
});

it("a /tmp filled before a takeover lets the old owner's last call ending kill the new owner's call", async () => {
  const old = await sandbox.create(testBoxSpec());
  let found: SandboxHandle | undefined;
  try {
    await run(old, "dd if=/dev/zero of=/tmp/fill bs=64k 2>/dev/null; true");
    // The old owner's worker froze in the middle of this call; its agent lives on.
    const oldCall = run(old, "sleep 1");
    found = await sandbox.find(old.runId);
    assert.ok(found !== undefined);
    const call = run(found, ": > started; sleep 3; echo survived");
    await begun(found, "started");
    assert.equal((await oldCall).exitCode, 0);
    const r = await call;
    assert.deepEqual(
      [r.exitCode, r.stdout],
      [0, "survived\n"],
      "the old owner's agent killed the new owner's call when its own last call ended",
    );
    old.detach?.();
  } finally {
    await (found ?? old).destroy();
  }
});
