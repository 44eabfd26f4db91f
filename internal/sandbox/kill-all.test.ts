/**
 * Nothing a call started survives agentd deciding it is over, against the real engine:
 * kill-all catches processes that escaped their group (setsid, double fork) and fork bombs
 * at the pids limit, and a call's timeout holds in the container after its worker is gone.
 * Every test runs twice: through the in-container agent, and through `docker exec` (the
 * fallback for images without it); the exec scripts' own watchdog only in the second.
 */
import assert from "node:assert/strict";
import type { Duplex } from "node:stream";
import { after, before, describe, it } from "node:test";
import type Docker from "dockerode";
import { TEST_LIMITS, testBoxSpec, testSandbox } from "../testing/docker.ts";
import { containerName } from "./docker-sandbox.ts";
import { RUN_SCRIPT } from "./exec-scripts.ts";
import type { Sandbox, SandboxHandle } from "./port.ts";

for (const agent of [true, false]) {
  describe(agent ? "through the agent" : "through docker exec", () => {
    let docker: Docker;
    let sandbox: Sandbox;
    let label: string;
    let cleanup: () => Promise<void>;

    const sh = (h: SandboxHandle, cmd: string, timeoutMs = 10_000) =>
      h.exec({ argv: ["sh", "-c", cmd], timeoutMs, maxOutputBytes: 64 * 1024 });
    const sizeOf = async (h: SandboxHandle, file: string) =>
      Number((await sh(h, `wc -c < ${file} 2>/dev/null || echo 0`)).stdout.trim());
    const box = () => sandbox.create(testBoxSpec());
    /** Whether `path` exists and is not empty in the container, asked as root by the engine. */
    const hasFile = async (id: string, path: string): Promise<boolean> => {
      const exec = await docker.getContainer(id).exec({
        Cmd: ["test", "-s", path],
        User: "0:0",
        AttachStdout: true,
      });
      const stream = await exec.start({});
      await new Promise((r) => {
        stream.on("end", r);
        stream.on("error", r);
        stream.resume();
      });
      return (await exec.inspect()).ExitCode === 0;
    };

    before(async () => {
      ({ docker, sandbox, label, cleanup } = await testSandbox({ agent }));
    });
    after(async () => {
      await cleanup();
    });

    describe("killAll", () => {
      it("costs nothing on a container whose calls all cleaned up after themselves", async () => {
        const h = await box();
        try {
          await sh(h, "echo ok");
          // Frozen, the container cannot answer an exec or the agent: a kill-all that called
          // into it would fail or hang. It returns: the handle knew nothing was running.
          await docker.getContainer(h.id).pause();
          try {
            await h.killAll();
          } finally {
            await docker.getContainer(h.id).unpause();
          }
          // A handle found again does not know what its previous owner left running (here a
          // call still in flight, as a dead worker leaves it), whatever its own calls did
          // (find() itself looks at the fill mark): its kill-all really kills.
          const running = sh(h, "echo started > /tmp/left; exec sleep 600", 700_000);
          // Looked at from outside agentd (root, docker exec): a call of the handle would
          // end with its own clean-up, which in docker exec mode may stop the one running.
          let started = false;
          for (let i = 0; i < 600 && !started; i++) {
            started = await hasFile(h.id, "/tmp/left");
            if (!started) await new Promise((r) => setTimeout(r, 100));
          }
          assert.ok(started, "the left-over call started");
          const found = (await sandbox.find(h.runId)) as SandboxHandle;
          await found.killAll();
          const left = await running;
          assert.notEqual(left.exitCode, 0, "the left-over call was killed, not finished");
          const ps = await sh(found, "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '");
          assert.match(ps.stdout, /cat/, "the process list was read");
          assert.doesNotMatch(ps.stdout, /sleep 600/, "nothing of it is left");
        } finally {
          await h.destroy();
        }
      });

      it("kills processes that left their process group and keeps the container usable", async () => {
        const h = await box();
        try {
          // A daemon in a session of its own, double-forked, writing every 100 ms, started by a
          // call that is still running (the end of a call would kill it too: see below).
          const running = sh(
            h,
            "setsid sh -c '(while :; do echo x >> /workspace/grow; sleep 0.1; done) &' </dev/null >/dev/null 2>&1; sleep 30",
            60_000,
          ).catch(() => undefined);
          let before = 0;
          for (let i = 0; i < 50 && before === 0; i++) {
            await new Promise((r) => setTimeout(r, 100));
            before = await sizeOf(h, "/workspace/grow");
          }
          assert.ok(before > 0, "the daemon runs");
          await h.killAll();
          await running;
          const a = await sizeOf(h, "/workspace/grow");
          await new Promise((r) => setTimeout(r, 500));
          assert.equal(await sizeOf(h, "/workspace/grow"), a, "the file stopped growing");
          const ps = await sh(h, "ps -o args | grep -c '[e]cho x' || true");
          assert.equal(ps.stdout.trim(), "0");
          // The main process (the control loop) survived: the workspace still comes out.
          let bytes = 0;
          for await (const c of h.exportWorkspace()) bytes += c.byteLength;
          assert.ok(bytes > 1024, "export works after kill-all");
        } finally {
          await h.destroy();
        }
      });

      it("kills a fork bomb at the pids limit (making room for its own kill)", async () => {
        const h = await box();
        try {
          void sh(h, "b(){ b|b& }; b", 30_000).catch(() => undefined);
          await new Promise((r) => setTimeout(r, 1500));
          await h.killAll();
          const after = await sh(h, "ls /proc | grep -c '^[0-9]'");
          assert.equal(after.exitCode, 0, after.stderr);
          assert.ok(Number(after.stdout.trim()) < 10, `few processes left: ${after.stdout}`);
          const info = await docker.getContainer(h.id).inspect();
          assert.equal(info.HostConfig.PidsLimit, TEST_LIMITS.pids, "the pids limit is put back");
        } finally {
          await h.destroy();
        }
      });

      it("works on a container found again by another process (no control channel)", async () => {
        const h = await box();
        try {
          const running = sh(
            h,
            "setsid sh -c 'sleep 4141 &' </dev/null >/dev/null 2>&1; sleep 30",
            60_000,
          ).catch(() => undefined);
          await new Promise((r) => setTimeout(r, 500));
          h.detach?.();
          const found = (await sandbox.find(h.runId)) as SandboxHandle;
          await found.killAll();
          await running;
          const ps = await sh(found, "ps -o args | grep -c '^sleep 4141' || true");
          assert.equal(ps.stdout.trim(), "0");
        } finally {
          await h.destroy();
        }
      });
    });

    describe("nothing a call started outlives it", () => {
      it("a daemon that escaped to its own session is gone when its call ends", async () => {
        const h = await box();
        try {
          await sh(
            h,
            "setsid -f sleep 4545 </dev/null >/dev/null 2>&1; (setsid sleep 4646 &) ; true",
          );
          const ps = await sh(h, "ps -o args | grep -c '^sleep 4[56]4[56]' || true");
          assert.equal(ps.stdout.trim(), "0");
        } finally {
          await h.destroy();
        }
      });

      it("a call that kills its own supervising shell leaves nothing running either", async () => {
        const h = await box();
        try {
          // Through docker exec the command's parent is the exec's shell: killing it skips that
          // shell's kill-all. Through the agent the parent is the agent, which it cannot kill.
          const r = await sh(
            h,
            "setsid sh -c 'while :; do echo x >> /workspace/g3; sleep 0.1; done' </dev/null >/dev/null 2>&1 & sleep 0.3; kill -KILL $PPID",
          );
          if (agent) assert.equal(r.exitCode, 1, "kill of the agent refused");
          else assert.ok(r.exitCode >= 128, `exit ${r.exitCode}`);
          // Listed by the engine (docker top): another exec would end with a kill-all itself.
          const top = await docker.getContainer(containerName(label, h.runId)).top();
          const loops = top.Processes.filter((p: string[]) =>
            p.join(" ").includes("/workspace/g3"),
          );
          assert.deepEqual(loops, [], "the loop is dead when the call returns");
        } finally {
          await h.destroy();
        }
      });

      it("each call has a HOME of its own: a dotfile one call writes is not read by the next", async () => {
        const h = await box();
        try {
          const a = await sh(
            h,
            "echo $HOME; printf '[core]\\n\\tfsmonitor = echo\\n' > ~/.gitconfig; ls -a ~",
          );
          assert.match(a.stdout, /\.gitconfig/);
          const b = await sh(
            h,
            "echo $HOME; cat ~/.gitconfig 2>&1 || echo none; ls /tmp/.agentd-home | wc -l",
          );
          const [homeA] = a.stdout.split("\n");
          const [homeB, content] = b.stdout.split("\n");
          assert.notEqual(homeA, homeB);
          assert.match(content ?? "", /none|No such file/);
        } finally {
          await h.destroy();
        }
      });

      // Through the agent there is no pid file or watchdog: the agent times calls out itself.
      if (!agent)
        it("a call that forges its pid file and kills its watchdog is still stopped at its timeout", async () => {
          const h = await box();
          try {
            // The loop never ends by itself: that the call returns at all is its timeout holding.
            const r = await sh(
              h,
              "for f in /tmp/.agentd-exec/*; do echo 999999 > $f; done; pkill -f agentd-watchdog; while :; do echo x >> /workspace/g2; sleep 0.1; done",
              1000,
            );
            assert.equal(r.timedOut, true);
            const a = await sizeOf(h, "/workspace/g2");
            await new Promise((r) => setTimeout(r, 500));
            assert.equal(await sizeOf(h, "/workspace/g2"), a, "the loop is dead");
          } finally {
            await h.destroy();
          }
        });
    });

    // The agent's own timeout without agentd: agent.attack.test.ts.
    if (!agent)
      describe("a call's timeout without its worker (the exec scripts' watchdog)", () => {
        it("is enforced inside the container when the client that started it is gone", async () => {
          const h = await box();
          try {
            const c = docker.getContainer(containerName(label, h.runId));
            // What a worker's exec looks like, with a 1 s watchdog; the client then vanishes.
            const exec = await c.exec({
              Cmd: ["sh", "-c", RUN_SCRIPT, "agentd-exec", "orphan", "1", "sh", "-c", "sleep 4343"],
              AttachStdout: true,
              AttachStderr: true,
              User: "1000:1000",
            });
            const stream = (await exec.start({ hijack: true, stdin: false })) as unknown as Duplex;
            await new Promise((r) => setTimeout(r, 300));
            stream.destroy();
            const running = await sh(h, "ps -o args | grep -c '^sleep 4343' || true");
            assert.equal(running.stdout.trim(), "1", "still running right after the client left");
            await new Promise((r) => setTimeout(r, 1500));
            const later = await sh(h, "ps -o args | grep -c '^sleep 4343' || true");
            assert.equal(later.stdout.trim(), "0", "killed by the in-container watchdog");
          } finally {
            await h.destroy();
          }
        });

        it("leaves no watchdog behind after an ordinary call", async () => {
          const h = await box();
          try {
            for (let i = 0; i < 5; i++) await sh(h, "true");
            const ps = await sh(h, "ps -o args");
            // Watchdogs by the call they guard (busybox shows a forked `sleep` with its parent's
            // arguments, so one watchdog can be two lines).
            const guarded = new Set(
              ps.stdout
                .split("\n")
                .filter((l) => /^sh -c sleep .*agentd-watchdog/.test(l))
                .map((l) => l.split(" ").pop()),
            );
            // At most the ps's own call's (it may not have started yet); none of the five before.
            assert.ok(guarded.size <= 1, ps.stdout);
          } finally {
            await h.destroy();
          }
        });
      });
  });
}
