/**
 * Secret containment against the ways around it a review found (issue #27), each in a run
 * of its own (real kernel, real Docker sandbox, real Redis log): bytes left in /dev/shm or
 * in an IPC object, a symlink's target, an entry planted in the calls' unlistable HOME
 * directory, a file's or a directory's metadata. After a person approves a call that writes
 * a secret, a later call that could read what it left needs a person, or it is gone.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Sandbox } from "../sandbox/port.ts";
import type { Stack } from "../testing/api-fixtures.ts";
import { startStack } from "../testing/api-fixtures.ts";
import {
  type ContainmentRun,
  containmentKernel,
  containmentRun,
  holds,
  SECRET,
} from "../testing/containment-run.ts";
import { sandboxImage, testSandbox } from "../testing/docker.ts";
import { importNoShellImage } from "../testing/registry.ts";
import type { CallOutcome, Kernel } from "./kernel.ts";
import { CONTAINER_STATE, SEALED_SHOWN } from "./secret-taint.ts";

let stack: Stack;
let sandbox: Sandbox;
let cleanupBoxes: () => Promise<void>;
let ownImage: string | undefined; // a run's own image, with a VOLUME
let execSandbox: Sandbox; // without the agent: `docker exec` per call
let cleanupExec: () => Promise<void>;
let kernel: Kernel;

/** A run of its own with a sandbox of the given image holding hello.txt. */
const freshRun = (
  on: Sandbox = sandbox,
  image = sandboxImage("test"),
  userImage = false,
): Promise<ContainmentRun> =>
  containmentRun(stack, on, kernel, { image, userImage, prompt: "containment bypass" });

before(async () => {
  stack = await startStack();
  const t = await testSandbox();
  sandbox = t.sandbox;
  cleanupBoxes = t.cleanup;
  const e = await testSandbox({ agent: false });
  execSandbox = e.sandbox;
  cleanupExec = e.cleanup;
  kernel = containmentKernel(stack);
});

after(async () => {
  await cleanupBoxes?.();
  await cleanupExec?.();
  if (ownImage !== undefined) {
    const { requireDocker } = await import("../testing/docker.ts");
    await (await requireDocker())
      .getImage(ownImage)
      .remove({ force: true })
      .catch(() => undefined);
  }
  await stack?.stop();
});

const enc = (s: string) => Buffer.from(s).toString("base64");
const leaked = (r: CallOutcome): boolean =>
  JSON.stringify(r).includes(enc(SECRET).slice(0, 16)) || JSON.stringify(r).includes(SECRET);
const exitOk = (r: CallOutcome): boolean =>
  r.kind === "result" && r.ok && (r.output as { exitCode?: number }).exitCode === 0;
const held = (f: ContainmentRun): string[] => [...(f.run.taint?.keys() ?? [])].sort();

describe("secret containment: the ways around it are closed", () => {
  it("a secret left in /dev/shm is tainted: re-encoding it asks a person", async () => {
    const f = await freshRun();
    const w = await f.approved("process.run", {
      command: 'printf %s "$ENV.DEMO_TOKEN" > /dev/shm/t',
    });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    assert.equal(holds(f.run, "/dev/shm/t"), true, JSON.stringify(held(f)));
    const r = await f.unapproved("process.run", { command: "base64 -w0 /dev/shm/t" });
    assert.equal(r.kind, "paused", `leaked=${leaked(r)} ${JSON.stringify(r).slice(0, 400)}`);
  });

  it("every read-write mount is scanned or empty: what a secret call leaves anywhere is tainted", async () => {
    const f = await freshRun();
    // Every place the sandbox user can write, from inside: read-write mounts (but the
    // kernel's /proc and /sys) whose root it may write, and every writable directory.
    const survey = await f.sh(
      'grep -E \' rw[, ]\' /proc/mounts | while read -r d m t o r; do case $m in /proc*|/sys*) continue;; esac; [ -w "$m" ] && echo "$m"; done; echo ---; find / -xdev -type d -writable 2>/dev/null | head -n 20',
    );
    const writable =
      survey.stdout
        .split("---")[0]
        ?.split("\n")
        .filter((l) => l !== "") ?? [];
    assert.equal(writable.length > 0, true, survey.stdout);
    const cmd = writable.map((m) => `printf %s "$ENV.DEMO_TOKEN" > '${m}/agentd-probe'`).join("; ");
    const w = await f.approved("process.run", {
      command: `${cmd}; touch /dev/mqueue/q 2>/dev/null; true`,
    });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    // A POSIX message queue's bytes are in no file a scan can hash: none survives the call.
    const q = await f.sh("ls -A /dev/mqueue");
    assert.equal(q.stdout.trim(), "", q.stdout);
    for (const m of writable) {
      const left = await f.sh(`test -e '${m}/agentd-probe'`);
      if (left.exitCode !== 0) continue; // wiped (/dev/mqueue)
      assert.equal(holds(f.run, `${m}/agentd-probe`), true, `${m}: ${JSON.stringify(held(f))}`);
    }
    assert.equal(writable.includes("/dev/shm"), true, JSON.stringify(writable));
  });

  it("a symlink's target is digested: a link replaced in place taints", async () => {
    const f = await freshRun();
    const pre = await f.unapproved("process.run", { command: "ln -s placeholder /workspace/l" });
    assert.equal(exitOk(pre), true, JSON.stringify(pre));
    const w = await f.approved("process.run", {
      command: 'ln -sfn "$ENV.DEMO_TOKEN" /workspace/l',
    });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    assert.equal(holds(f.run, "/workspace/l"), true, JSON.stringify(held(f)));
    const r = await f.unapproved("process.run", {
      command: "readlink /workspace/l | tr -d '\\n' | base64 -w0",
    });
    assert.equal(r.kind, "paused", `leaked=${leaked(r)} ${JSON.stringify(r).slice(0, 400)}`);
  });

  it("a file's metadata is digested: an mtime set from the secret taints the file", async () => {
    const f = await freshRun();
    const w = await f.approved("process.run", {
      command: 'touch -d "@$(printf %s "$ENV.DEMO_TOKEN" | od -An -tu4 -N4 | tr -d " ")" hello.txt',
    });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    assert.equal(holds(f.run, "/workspace/hello.txt"), true, JSON.stringify(held(f)));
    const want = Buffer.from(SECRET).readUInt32LE(0);
    const r = await f.unapproved("process.run", { command: "stat -c %Y hello.txt" });
    assert.equal(
      r.kind,
      "paused",
      `mtime=${want} leaked=${JSON.stringify(r).includes(String(want))}`,
    );
  });

  it("a mode set from the secret taints the file; a directory's time is reset, not kept", async () => {
    const f = await freshRun();
    await f.sh("mkdir /workspace/d");
    const w = await f.approved("process.run", {
      command:
        'b=$(printf %s "$ENV.DEMO_TOKEN" | od -An -tu1 -N1 | tr -d " "); chmod $((b % 8))00 hello.txt; touch -d "@$b" /workspace/d',
    });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    assert.equal(holds(f.run, "/workspace/hello.txt"), true, JSON.stringify(held(f)));
    const b = Buffer.from(SECRET)[0] as number;
    const t = await f.sh("stat -c %Y /workspace/d");
    assert.notEqual(Number(t.stdout.trim()), b, "the directory kept the time the call set");
  });

  it("an entry of the HOME directory made before the secret call is scanned", async () => {
    const f = await freshRun();
    const plant = await f.unapproved("process.run", { command: "mkdir -p /tmp/.agentd-home/s2" });
    assert.equal(exitOk(plant), true, JSON.stringify(plant));
    const w = await f.approved("process.run", {
      command: 'printf %s "$ENV.DEMO_TOKEN" > /tmp/.agentd-home/s2/t',
    });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    assert.equal(holds(f.run, "/tmp/.agentd-home/s2/t"), true, JSON.stringify(held(f)));
    const r = await f.unapproved("process.run", { command: "base64 -w0 /tmp/.agentd-home/s2/t" });
    assert.equal(r.kind, "paused", `leaked=${leaked(r)} ${JSON.stringify(r).slice(0, 400)}`);
  });

  it("an entry a secret call leaves in the HOME directory is seen though it removed another", async () => {
    const f = await freshRun();
    const pad = await f.unapproved("process.run", { command: "mkdir -p /tmp/.agentd-home/pad" });
    assert.equal(exitOk(pad), true, JSON.stringify(pad));
    const w = await f.approved("process.run", {
      command:
        'rmdir /tmp/.agentd-home/pad && mkdir /tmp/.agentd-home/k9 && printf %s "$ENV.DEMO_TOKEN" > /tmp/.agentd-home/k9/t',
    });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    const r = await f.unapproved("process.run", { command: "base64 -w0 /tmp/.agentd-home/k9/t" });
    assert.equal(r.kind, "paused", `leaked=${leaked(r)} ${JSON.stringify(r).slice(0, 300)}`);
  });

  it("a watcher an earlier call left is killed before the scan after the secret call", async () => {
    const f = await freshRun();
    await f.approved("process.run", {
      command:
        "(while [ ! -s /workspace/tok2.txt ]; do sleep 0.05; done; sleep 3; base64 -w0 /workspace/tok2.txt > /workspace/leak.txt; mv /workspace/tok2.txt /tmp/gone) >/dev/null 2>&1 &",
    });
    const w = await f.approved("process.run", {
      command: 'printf %s "$ENV.DEMO_TOKEN" > /workspace/tok2.txt',
    });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    // Long enough for the watcher's 3 s sleep to pass, had it survived.
    await new Promise((r) => setTimeout(r, 6000));
    const r = await f.unapproved("repo.read", { path: "leak.txt" });
    assert.equal(r.kind === "result" && leaked(r), false, JSON.stringify(r).slice(0, 300));
  });

  it("without the agent (docker exec), a HOME entry and /dev/shm are scanned all the same", async () => {
    const f = await freshRun(execSandbox);
    // The scans' own HOMEs and pid files come and go: a secret call that writes nothing
    // taints no file here either (only the container's kernel state is held).
    const quiet = await f.approved("process.run", { command: 'test -n "$ENV.DEMO_TOKEN"' });
    assert.equal(exitOk(quiet), true, JSON.stringify(quiet));
    assert.deepEqual(held(f), [CONTAINER_STATE]);
    const plant = await f.approved("process.run", { command: "mkdir -p /tmp/.agentd-home/s3" });
    assert.equal(exitOk(plant), true, JSON.stringify(plant));
    const w = await f.approved("process.run", {
      command:
        'printf %s "$ENV.DEMO_TOKEN" > /tmp/.agentd-home/s3/t; printf %s "$ENV.DEMO_TOKEN" > /dev/shm/u',
    });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    for (const p of ["/tmp/.agentd-home/s3/t", "/dev/shm/u"])
      assert.equal(holds(f.run, p), true, `${p}: ${JSON.stringify(held(f))}`);
    const r = await f.unapproved("process.run", { command: "base64 -w0 /dev/shm/u" });
    assert.equal(r.kind, "paused", `leaked=${leaked(r)} ${JSON.stringify(r).slice(0, 400)}`);
  });

  it("in a Debian image (GNU tools): IPC objects a secret call made are gone after it; links and modes taint", async () => {
    const f = await freshRun(sandbox, sandboxImage("base"));
    const pre = await f.unapproved("process.run", { command: "ln -s placeholder l" });
    assert.equal(exitOk(pre), true, JSON.stringify(pre));
    const w = await f.approved("process.run", {
      command:
        'ipcmk -M 64 && ipcmk -Q && ipcmk -S 2 && ln -sfn "$ENV.DEMO_TOKEN" l && chmod 600 hello.txt',
    });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    const ipc = await f.sh(
      "for t in shm msg sem; do tail -n +2 /proc/sysvipc/$t; done | grep -c .",
    );
    assert.equal(ipc.stdout.trim(), "0", `left: ${ipc.stdout}`);
    for (const p of ["/workspace/l", "/workspace/hello.txt"])
      assert.equal(holds(f.run, p), true, `${p}: ${JSON.stringify(held(f))}`);
  });

  it("a run's own image: its VOLUME (a tmpfs) is scanned like every other writable mount", async () => {
    const { requireDocker } = await import("../testing/docker.ts");
    ownImage = `agentd-test-contain:${Date.now()}`;
    const id = await importNoShellImage(await requireDocker(), ownImage);
    const f = await freshRun(sandbox, id, true);
    // No shell in this image: argv, with the injected busybox's sh named by its path.
    const sh = (c: string) => ({ argv: ["/.agentd/bin/sh", "-c", c] });
    const w = await f.approved("process.run", sh('printf %s "$ENV.DEMO_TOKEN" > /data/t'));
    assert.equal(exitOk(w), true, JSON.stringify(w));
    assert.equal(holds(f.run, "/data/t"), true, JSON.stringify(held(f)));
    const r = await f.unapproved("process.run", sh("base64 /data/t"));
    assert.equal(r.kind, "paused", `leaked=${leaked(r)} ${JSON.stringify(r).slice(0, 400)}`);
  });

  it("which files a secret call removed is a write: listing them asks a person", async () => {
    const f = await freshRun();
    await f.sh("cd /workspace && for i in 0 1 2 3 4 5 6 7; do : > f$i; done");
    const w = await f.approved("process.run", {
      command:
        'b=$(printf %s "$ENV.DEMO_TOKEN" | od -An -tu1 -N1 | tr -d " "); for i in 0 1 2 3 4 5 6 7; do [ $(( (b >> i) & 1 )) = 1 ] && rm f$i; done; true',
    });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    const b = Buffer.from(SECRET)[0] as number;
    const removed = [0, 1, 2, 3, 4, 5, 6, 7]
      .filter((i) => (b >> i) & 1)
      .map((i) => `/workspace/f${i}`);
    for (const p of removed)
      assert.equal(holds(f.run, p), true, `${p}: ${JSON.stringify(held(f))}`);
    const r = await f.unapproved("process.run", { command: "ls /workspace" });
    assert.equal(r.kind, "paused", JSON.stringify(r).slice(0, 400));
  });

  it("removing the file that holds the secret ends its taint (no new one for the removal)", async () => {
    const f = await freshRun();
    const w = await f.approved("process.run", { command: 'printf %s "$ENV.DEMO_TOKEN" > tok.txt' });
    assert.equal(exitOk(w), true, JSON.stringify(w));
    const rm = await f.approved("process.run", { command: "rm tok.txt" });
    assert.equal(exitOk(rm), true, JSON.stringify(rm));
    // No file stays held (the container's kernel state does: an exec still waits, naming
    // every root alike); a repo.search of the workspace runs without a person.
    const exec = await f.unapproved("process.run", { command: "ls /workspace" });
    assert.deepEqual(exec.kind === "paused" && exec.preview.secretFiles, [...SEALED_SHOWN]);
    assert.deepEqual(held(f), [CONTAINER_STATE]);
    const free = await f.unapproved("repo.search", { query: "hello" });
    assert.equal(
      free.kind,
      "result",
      `${JSON.stringify(held(f))} ${JSON.stringify(free).slice(0, 300)}`,
    );
  });
});
