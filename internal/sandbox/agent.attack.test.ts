/**
 * The in-container agent under attack, on the real engine and the busybox test image:
 * hostile programs inside the sandbox try to forge another call's result or framing,
 * kill, stop or read the agent, gain a capability, outlive their call, and flood it. The
 * agent's own features are checked on the way: concurrent calls, stdout and stderr apart,
 * live output, exit codes, timeouts on the whole group, caps, cwd, env, stdin.
 */
import assert from "node:assert/strict";
import type { Duplex } from "node:stream";
import { after, before, describe, it } from "node:test";
import type Docker from "dockerode";
import { isAgentdError } from "../errors.ts";
import { testBoxSpec, testSandbox } from "../testing/docker.ts";
import { AgentChannel } from "./agent-channel.ts";
import { demux } from "./docker-stream.ts";
import type { ExecRequest, Sandbox, SandboxHandle } from "./port.ts";

let docker: Docker;
let sandbox: Sandbox;
let cleanup: () => Promise<void>;
let box: SandboxHandle;

const run = (h: SandboxHandle, cmd: string, extra: Partial<ExecRequest> = {}) =>
  h.exec({ argv: ["sh", "-c", cmd], timeoutMs: 10_000, maxOutputBytes: 64 * 1024, ...extra });

const newBox = () => sandbox.create(testBoxSpec());

/** Runs a command in the container as root through the engine (the test's own hand). */
async function asRoot(id: string, cmd: string): Promise<string> {
  const exec = await docker.getContainer(id).exec({
    Cmd: ["sh", "-c", cmd],
    AttachStdout: true,
    AttachStderr: true,
    User: "0:0",
  });
  const stream = (await exec.start({ hijack: true, stdin: false })) as unknown as Duplex;
  let out = "";
  demux(stream, (_, chunk) => {
    out += chunk.toString("utf8");
  });
  await new Promise((r) => stream.on("end", r));
  return out;
}

/** The agent's pid inside the container. */
async function agentPid(id: string): Promise<string> {
  const out = await asRoot(
    id,
    'for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = agentd-agent ] && basename $p; done',
  );
  const pid = out.trim().split("\n")[0] ?? "";
  assert.match(pid, /^\d+$/, out);
  return pid;
}

before(async () => {
  ({ docker, sandbox, cleanup } = await testSandbox());
  box = await newBox();
});
after(async () => {
  await cleanup();
});

describe("the agent's calls", () => {
  it("runs many calls at once, each with its own stdout, stderr, exit code, cwd and env", async () => {
    await run(box, "mkdir -p /workspace/sub");
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        run(box, `sleep 0.$((RANDOM % 3)); echo "out $N $(pwd)"; echo "err $N" >&2; exit $N`, {
          env: { N: String(i) },
          cwd: i % 2 === 0 ? "/workspace/sub" : "/tmp",
        }),
      ),
    );
    results.forEach((r, i) => {
      assert.equal(r.exitCode, i);
      assert.equal(r.stdout, `out ${i} ${i % 2 === 0 ? "/workspace/sub" : "/tmp"}\n`);
      assert.equal(r.stderr, `err ${i}\n`);
    });
  });

  it("streams output live and feeds stdin", async () => {
    // The command prints b only once the test, having seen a, lets it: output held back
    // until the call ends would leave it waiting until its timeout.
    const gate = `/tmp/gate-${Date.now()}`;
    let released: Promise<unknown> | undefined;
    const r = await run(box, `echo a; while [ ! -e ${gate} ]; do sleep 0.05; done; echo b`, {
      timeoutMs: 120_000,
      onOutput: () => {
        released ??= run(box, `touch ${gate}`);
      },
    });
    await released;
    assert.equal(r.timedOut, false, "a arrived while the call ran");
    assert.equal(r.stdout, "a\nb\n");
    const big = Buffer.alloc(3 * 1024 * 1024, 120);
    const w = await box.exec({
      argv: ["wc", "-c"],
      stdin: big,
      timeoutMs: 10_000,
      maxOutputBytes: 1024,
    });
    assert.equal(w.stdout.trim(), String(big.length));
  });

  it("a timeout kills the whole group and whatever escaped it; nothing outlives the call", async () => {
    // That the call returns at all (sleep 303 in front) is its timeout holding.
    const r = await run(box, "sleep 300 & setsid sleep 301 & (sleep 302 &) ; sleep 303", {
      timeoutMs: 500,
    });
    assert.equal(r.timedOut, true);
    const left = await run(box, "ps -o user,args | grep -c 'sleep 30[0-3]' || true");
    assert.equal(left.stdout.trim(), "0", "no sleep is left");
  });

  it("an output flood is capped, stopped, and the agent stays small", async () => {
    const r = await run(box, "yes flood", { maxOutputBytes: 100_000 });
    assert.equal(r.truncated, true);
    assert.ok(r.stdout.length <= 100_200, String(r.stdout.length));
    const pid = await agentPid(box.id);
    const rss = /VmRSS:\s+(\d+) kB/.exec(await asRoot(box.id, `cat /proc/${pid}/status`));
    assert.ok(Number(rss?.[1]) < 16 * 1024, `agent RSS ${rss?.[1]} kB`);
  });

  it("a process that never reads its stdin holds up its own call only", async () => {
    let stuckEnded = false;
    const stuck = box
      .exec({
        argv: ["sleep", "30"],
        stdin: Buffer.alloc(4 * 1024 * 1024, 120),
        timeoutMs: 10_000,
        maxOutputBytes: 1024,
      })
      .finally(() => {
        stuckEnded = true;
      });
    await new Promise((r) => setTimeout(r, 200));
    const other = await run(box, "echo quick");
    assert.equal(other.stdout, "quick\n");
    assert.equal(stuckEnded, false, "the other call ended while the stuck one still ran");
    const r = await stuck;
    assert.equal(r.timedOut, true);
  });

  it("a missing program or cwd is the call's own failure, not the agent's", async () => {
    const a = await box.exec({ argv: ["no-such-program"], timeoutMs: 5000, maxOutputBytes: 1024 });
    assert.equal(a.exitCode, 127);
    assert.match(a.stderr, /no-such-program/);
    const b = await run(box, "true", { cwd: "/no/such/dir" });
    assert.equal(b.exitCode, 126);
    assert.match(b.stderr, /\/no\/such\/dir/);
    await assert.rejects(
      box.exec({ argv: ["true"], env: { "A=B": "x" }, timeoutMs: 1000, maxOutputBytes: 1 }),
      (err) => isAgentdError(err, "EVALIDATION"),
    );
    assert.equal((await run(box, "echo still")).stdout, "still\n");
  });

  it("gives every call a fresh HOME that is gone afterwards", async () => {
    const a = await run(box, 'echo "$HOME"; echo "[alias]x=!id" > "$HOME/.gitconfig"');
    const home = a.stdout.trim();
    assert.match(home, /^\/tmp\/\.agentd-home\/[0-9a-f]{16}$/);
    const b = await run(box, `echo "$HOME"`);
    assert.notEqual(b.stdout.trim(), home);
    // The agent removes a call's HOME in a child after the result (the result does not wait
    // for it, agent.c remove_home): on a loaded machine the next call may see it still
    // going. Gone it must be (30 s: a safety net, not a figure).
    let left = "";
    for (const until = Date.now() + 30_000; Date.now() < until; ) {
      left = (await run(box, `ls -d ${home} 2>&1 || true`)).stdout;
      if (/No such file/.test(left)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.match(left, /No such file/);
  });
});

describe("hostile programs against the agent", () => {
  it("every sandbox process is uid 1000 without capabilities; the agent holds only SETUID and SETGID", async () => {
    const pid = await agentPid(box.id);
    const r = await run(
      box,
      `grep -E '^(Uid|CapEff|CapBnd|NoNewPrivs)' /proc/self/status; grep -E '^(Uid|CapEff)' /proc/${pid}/status`,
    );
    assert.match(r.stdout, /^Uid:\s+1000\s+1000\s+1000\s+1000$/m);
    assert.match(r.stdout, /CapEff:\s+0000000000000000/);
    assert.match(r.stdout, /CapBnd:\s+00000000000000c0/);
    assert.match(r.stdout, /NoNewPrivs:\s+1/);
    assert.match(r.stdout, /Uid:\s+0\s+0\s+0\s+0/);
    assert.match(r.stdout, /CapEff:\s+00000000000000c0/);
  });

  it("cannot kill, stop, read or write the agent, nor PID 1", async () => {
    const pid = await agentPid(box.id);
    const r = await run(
      box,
      `for s in KILL STOP TERM; do kill -$s ${pid} 2>/dev/null && echo SIGNALLED; kill -$s 1 2>/dev/null && echo SIGNALLED; done
       kill -9 -1 2>/dev/null
       echo x > /proc/${pid}/fd/1 2>/dev/null && echo WROTE
       echo x > /proc/1/fd/0 2>/dev/null && echo WROTE
       cat /proc/${pid}/fd/0 2>/dev/null && echo READ
       ls /proc/${pid}/fd 2>/dev/null && echo LISTED
       cat /proc/${pid}/environ 2>/dev/null && echo READ
       echo done`,
    );
    assert.doesNotMatch(r.stdout, /SIGNALLED|WROTE|READ|LISTED/);
    assert.equal(r.stdout, "done\n");
    assert.equal(r.exitCode, 0);
    assert.equal((await run(box, "echo alive")).stdout, "alive\n");
    assert.equal(await agentPid(box.id), pid, "the same agent");
  });

  it("cannot forge another call's result or framing: frames printed are its own output", async () => {
    // Frame bytes for call ids 1…64: an exit frame with status 0 and flags "clean", and a
    // stdout frame claiming "forged".
    const forge = Array.from({ length: 64 }, (_, i) => {
      const id = i + 1;
      const x = Buffer.alloc(14);
      x.write("X", 0, "latin1");
      x.writeUInt32BE(id, 1);
      x.writeUInt32BE(5, 5);
      x.writeUInt8(16, 13);
      const o = Buffer.concat([Buffer.from("O"), Buffer.alloc(8), Buffer.from("forged")]);
      o.writeUInt32BE(id, 1);
      o.writeUInt32BE(6, 5);
      return Buffer.concat([o, x]);
    });
    const bytes = Buffer.concat(forge);
    const victim = run(box, "sleep 1; echo honest; exit 7");
    const forger = box.exec({
      argv: ["sh", "-c", "tee /dev/stderr"],
      stdin: bytes,
      timeoutMs: 10_000,
      maxOutputBytes: 1024 * 1024,
    });
    const [v, f] = await Promise.all([victim, forger]);
    assert.equal(v.exitCode, 7);
    assert.equal(v.stdout, "honest\n");
    assert.equal(f.exitCode, 0);
    assert.equal(Buffer.from(f.stdout, "utf8").length > 0, true);
    assert.ok(f.stdout.includes("forged") && f.stderr.includes("forged"));
  });

  it("kill-all reaches every process of the sandbox user, a non-dumpable one too, and no root process", async () => {
    const b = await sandbox.create(testBoxSpec("base"));
    try {
      // An operator's root shell in the container (docker exec -u 0): not the sandbox's.
      void asRoot(b.id, "exec sleep 7777").catch(() => undefined);
      // A sandbox process that hides its /proc/PID owner (non-dumpable: /proc shows root).
      const hide =
        "import ctypes, os, time\nctypes.CDLL(None).prctl(4, 0, 0, 0, 0)\nif os.fork() == 0:\n  os.setsid(); time.sleep(600)\n";
      const r = await b.exec({
        argv: ["python3", "-c", hide],
        timeoutMs: 10_000,
        maxOutputBytes: 1024,
      });
      assert.equal(r.exitCode, 0, r.stderr);
      const ps = await asRoot(b.id, "ps -eo user,args");
      assert.doesNotMatch(ps, /time\.sleep|python3/, ps);
      assert.match(ps, /root\s+sleep 7777/, "the root process is left alone");
    } finally {
      await b.destroy();
    }
  });

  it("a process that keeps hopping to a new pid (fork, then exit) does not outlive its call", async () => {
    const b = await newBox();
    try {
      await run(
        b,
        `printf '#!/bin/sh\\necho $$ >> /workspace/hop.log\\nsh /workspace/hop.sh &\\n' > hop.sh`,
      );
      // The hopper starts in its own session, then the call ends: the agent's kill-all.
      const r = await run(b, "setsid sh /workspace/hop.sh </dev/null >/dev/null 2>&1 & sleep 0.3");
      assert.equal(r.exitCode, 0);
      const size = async () => Number((await run(b, "wc -l < hop.log")).stdout.trim());
      const a = await size();
      assert.ok(a > 10, `the hopper ran: ${a} hops`);
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(await size(), a, "no hop after the call ended");
    } finally {
      await b.destroy();
    }
  });

  it("cannot write into the output of agentd's own calls (private pipes), only into a sibling call's", async () => {
    const agent = await AgentChannel.exec(
      docker.getContainer(box.id),
      "/usr/local/libexec/agentd-agent",
      Date.now(),
    );
    try {
      await agent.ready();
      const outputs = { own: "", sibling: "" };
      const start = (name: "own" | "sibling", argv: string[]) =>
        agent.call(
          {
            argv,
            cwd: "/workspace",
            env: {},
            timeoutMs: 5000,
            maxOutputBytes: 4096,
            stdin: false,
            private: name === "own",
          },
          (_, chunk) => {
            outputs[name] += chunk.toString();
          },
        );
      const own = start("own", ["sleep", "1.5"]);
      const sibling = start("sibling", ["sh", "-c", "exec sleep 1.6"]);
      await new Promise((r) => setTimeout(r, 300));
      const inject = await run(
        box,
        `for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = sleep ] || continue
           echo forged > $p/fd/1 2>/dev/null && echo "into $(tr '\\0' ' ' < $p/cmdline)"; done; true`,
      );
      await Promise.all([own.done, sibling.done]);
      assert.equal(outputs.own, "", "nothing reached agentd's own call");
      assert.equal(outputs.sibling, "forged\n", "a sibling's pipe is the sandbox user's");
      assert.match(inject.stdout, /into sleep 1\.6/);
      assert.doesNotMatch(inject.stdout, /into sleep 1\.5/);
    } finally {
      agent.close();
    }
  });

  it("a process that stops every process of its uid (the agent's kill-all helper too) cannot stall the agent", async () => {
    const b = await newBox();
    try {
      // It stops its own call too: the call ends at its timeout, killed by the agent.
      const r = await run(
        b,
        "setsid sh -c 'while :; do kill -STOP -1; done' </dev/null >/dev/null 2>&1 & sleep 0.3",
        { timeoutMs: 1000 },
      );
      assert.equal(r.timedOut, true);
      const next = await run(b, "echo alive; ps -o stat,args | grep -c '[k]ill -STOP' || true");
      assert.equal(next.timedOut, false, "the next call is not stalled");
      assert.equal(next.stdout, "alive\n0\n");
    } finally {
      await b.destroy();
    }
  });

  it("cannot take the calls' HOME root away from the agent", async () => {
    const b = await newBox();
    try {
      const r = await run(
        b,
        "rm -rf /tmp/.agentd-home 2>&1; mv /tmp/.agentd-home /tmp/x 2>&1; ls /tmp/.agentd-home 2>&1; stat -c '%U %a' /tmp/.agentd-home",
      );
      assert.match(r.stdout, /root 1733\n$/);
      assert.equal((await run(b, "echo ok > f && cat f")).stdout, "ok\n");
      let bytes = 0;
      for await (const c of b.exportWorkspace()) bytes += c.byteLength;
      assert.ok(bytes > 0);
    } finally {
      await b.destroy();
    }
  });

  it("a fork bomb at the pids limit is killed through the agent, which needs no process to kill", async () => {
    const b = await newBox();
    await run(b, "bomb() { bomb | bomb & }; bomb; sleep 2", { timeoutMs: 3000 });
    await b.killAll();
    // A surviving bomb process forks back to the pids limit; what the sweep killed may take a
    // moment to be reaped on a loaded machine. The count must come down to init, agent, sh,
    // ps and wc (30 s: a safety net for a loaded machine, not a figure).
    let seen = "";
    for (const until = Date.now() + 30_000; Date.now() < until; ) {
      seen = (await run(b, "ps -o pid=,stat=,comm=")).stdout;
      if (seen.trim().split("\n").length <= 5) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    assert.ok(seen.trim().split("\n").length <= 5, seen);
    await b.destroy();
  });
});

describe("an agent that is gone or stuck", () => {
  it("killed from outside mid-call: the call fails closed, the container is lost and removed", async () => {
    const b = await newBox();
    const pid = await agentPid(b.id);
    const call = run(b, "sleep 30");
    await new Promise((r) => setTimeout(r, 300));
    await asRoot(b.id, `kill -9 ${pid}`);
    await assert.rejects(call, (err) => isAgentdError(err, "EIO") && /lost/.test(err.message));
    await assert.rejects(
      run(b, "true"),
      (err) => isAgentdError(err, "EIO") && /lost/.test(err.message),
    );
    await assert.rejects(docker.getContainer(b.id).inspect(), (err: { statusCode?: number }) => {
      return err.statusCode === 404;
    });
  });

  it("stopped from outside: a killed call that never ends fails closed within the escalation", async () => {
    const b = await newBox();
    const pid = await agentPid(b.id);
    await asRoot(b.id, `kill -STOP ${pid}`);
    // A stopped agent never answers: that the call ends at all is the escalation's doing.
    await assert.rejects(
      run(b, "true", { timeoutMs: 500 }),
      (err) => isAgentdError(err, "EIO") && /lost/.test(err.message),
    );
  });
});

describe("the fallback", () => {
  it("an image without the agent, or agent: false, runs through docker exec", async () => {
    const t = await testSandbox({ agent: false });
    try {
      const h = await t.sandbox.create(testBoxSpec());
      const info = await docker.getContainer(h.id).inspect();
      assert.equal(info.Config.User, "1000:1000");
      assert.equal(info.HostConfig.CapAdd ?? null, null);
      const r = await run(h, "id -u; echo e >&2; exit 4");
      assert.deepEqual([r.stdout, r.stderr, r.exitCode], ["1000\n", "e\n", 4]);
    } finally {
      await t.cleanup();
    }
  });

  it("a process whose main thread exited (a zombie leader with live threads) does not outlive its call, on both paths", async () => {
    const t = await testSandbox({ agent: false });
    try {
      const viaExec = await t.sandbox.create(testBoxSpec("base"));
      const viaAgent = await sandbox.create(testBoxSpec("base"));
      const py = [
        "import os, threading, time, ctypes",
        "if os.fork() == 0:",
        "  os.setsid()",
        "  def w():",
        "    while True:",
        "      open('/workspace/alive', 'w').write(str(time.time())); time.sleep(0.05)",
        "  threading.Thread(target=w).start()",
        "  ctypes.CDLL(None).syscall(60, 0)",
        "time.sleep(0.3)",
      ].join("\n");
      for (const h of [viaAgent, viaExec]) {
        const r = await h.exec({
          argv: ["python3", "-c", py],
          timeoutMs: 10_000,
          maxOutputBytes: 4096,
        });
        assert.equal(r.exitCode, 0, r.stderr);
        const a = (await run(h, "cat alive")).stdout;
        await new Promise((r) => setTimeout(r, 300));
        assert.equal((await run(h, "cat alive")).stdout, a, "the thread is gone with its call");
      }
    } finally {
      await t.cleanup();
    }
  });

  it("cwdWithin holds on both paths: a symlink out of the workspace is refused, nothing runs", async () => {
    const t = await testSandbox({ agent: false });
    try {
      const viaExec = await t.sandbox.create(testBoxSpec());
      for (const h of [box, viaExec]) {
        await run(h, "ln -sfn /tmp /workspace/out; mkdir -p /workspace/in");
        const within = { cwdWithin: "/workspace" };
        const out = await run(h, "touch ran", { ...within, cwd: "/workspace/out" });
        assert.equal(out.exitCode, 126);
        assert.match(out.stderr, /cwd leaves the workspace/);
        const none = await run(h, "true", { ...within, cwd: "/workspace/nope" });
        assert.equal(none.exitCode, 126);
        assert.match(none.stderr, /cwd does not exist: \/workspace\/nope/);
        const ok = await run(h, "pwd", { ...within, cwd: "/workspace/in" });
        assert.deepEqual([ok.exitCode, ok.stdout], [0, "/workspace/in\n"]);
        assert.equal((await run(h, "test -e /tmp/ran || echo absent")).stdout, "absent\n");
      }
    } finally {
      await t.cleanup();
    }
  });

  it("a container found after a takeover gets an agent of its own through one docker exec", async () => {
    const b = await newBox();
    await run(b, "echo kept > k.txt");
    b.detach?.();
    const found = await sandbox.find(b.runId);
    assert.ok(found !== undefined);
    await found.killAll();
    const r = await run(found, "cat k.txt; id -u");
    assert.equal(r.stdout, "kept\n1000\n");
    const agents = async () =>
      (
        await asRoot(b.id, "ps -o args | grep -c '^/usr/local/libexec/agentd-agent' || true")
      ).trim();
    assert.equal(await agents(), "2", "the idle first agent and the found handle's");
    // A call's ancestors: through the agent they include agentd-agent; a docker exec's shell
    // has no parent in the container (PPid 0).
    const chain = await run(
      found,
      "p=$$; while [ \"$p\" -gt 1 ]; do tr '\\0' ' ' < /proc/$p/cmdline; echo; p=$(awk '/^PPid/{print $2}' /proc/$p/status); done",
    );
    assert.match(
      chain.stdout,
      /agentd-agent/,
      `calls through the agent, not docker exec:\n${chain.stdout}`,
    );
    found.detach?.();
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(await agents(), "1", "the second agent exits when its pipe closes");
    await found.destroy();
  });
});
