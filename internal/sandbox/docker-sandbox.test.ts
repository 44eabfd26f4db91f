/**
 * Hostile tests of the Docker sandbox against the real engine: limits, jail, isolation.
 * Each test's containers carry a label unique to this file and are removed at the end.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type Docker from "dockerode";
import { ulid } from "ulid";
import { isAgentdError } from "../errors.ts";
import { sandboxImage, TEST_LIMITS, testSandbox } from "../testing/docker.ts";
import { tarOf } from "../testing/tar.ts";
import { collect } from "./collect.ts";
import {
  containerName,
  createDockerSandbox,
  LABEL_MANAGED,
  LABEL_POOL,
  LABEL_RUN,
  LABEL_TENANT,
} from "./docker-sandbox.ts";
import type { ExecRequest, Sandbox, SandboxHandle } from "./port.ts";
import { MARK_DIR } from "./root-marks.ts";
import {
  normaliseWorkspaceArchive,
  packWorkspace,
  readHostDirectory,
} from "./workspace-archive.ts";

let docker: Docker;
let sandbox: Sandbox;
let cleanup: () => Promise<void>;
let image: string;
let box: SandboxHandle;

const run = (h: SandboxHandle, cmd: string, extra: Partial<ExecRequest> = {}) =>
  h.exec({ argv: ["sh", "-c", cmd], timeoutMs: 10_000, maxOutputBytes: 64 * 1024, ...extra });

before(async () => {
  ({ docker, sandbox, cleanup } = await testSandbox());
  image = sandboxImage("test");
  const tar = await packWorkspace([
    { path: "hello.txt", type: "file", mode: 0o644, data: Buffer.from("hi\n") },
  ]);
  box = await sandbox.create({
    runId: ulid(),
    tenantId: "acme",
    image,
    limits: TEST_LIMITS,
    network: "none",
    workspaceTar: tar,
  });
});
after(async () => {
  await cleanup();
});

describe("hardening", () => {
  it("runs as uid 1000 with no capabilities, no-new-privileges, a read-only root and the run's labels", async () => {
    const r = await run(
      box,
      "id -u; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; cat /workspace/hello.txt",
    );
    assert.equal(r.exitCode, 0, r.stderr);
    assert.match(r.stdout, /^1000\n/);
    assert.match(r.stdout, /CapEff:\s+0000000000000000/);
    assert.match(r.stdout, /NoNewPrivs:\s+1/);
    assert.match(r.stdout, /hi\n$/);
    const info = await docker.getContainer(box.id).inspect();
    // The main process is the agent: root with CAP_SETUID and CAP_SETGID only, to start
    // every call as user 1000 (agent.attack.test.ts attacks it).
    assert.equal(info.Config.User, "0:0");
    assert.deepEqual(info.Config.Entrypoint, ["/usr/local/libexec/agentd-agent"]);
    assert.deepEqual(info.HostConfig.CapDrop, ["ALL"]);
    assert.deepEqual(info.HostConfig.CapAdd, ["CAP_SETUID", "CAP_SETGID"]);
    assert.equal(info.HostConfig.ReadonlyRootfs, true);
    assert.deepEqual(info.HostConfig.SecurityOpt, ["no-new-privileges"]);
    assert.equal(info.HostConfig.NetworkMode, "none");
    // The workspace is a tmpfs charged to the same cgroup: processes keep memoryBytes.
    assert.equal(
      info.HostConfig.Memory,
      TEST_LIMITS.memoryBytes + (TEST_LIMITS.workspaceBytes as number),
    );
    assert.equal(info.HostConfig.PidsLimit, TEST_LIMITS.pids);
    assert.match(
      (info.HostConfig as { Tmpfs?: Record<string, string> }).Tmpfs?.["/workspace"] ?? "",
      new RegExp(`size=${TEST_LIMITS.workspaceBytes}`),
    );
    assert.equal(info.HostConfig.Privileged, false);
    assert.equal((info.HostConfig.Binds ?? []).length, 0, "no bind mount of a host path");
    assert.ok(
      info.Mounts.every((m) => m.Type !== "bind"),
      "no bind mounts",
    );
    assert.equal(info.Config.Labels[LABEL_RUN], box.runId);
    assert.equal(info.Config.Labels[LABEL_TENANT], "acme");
  });

  it("refuses writes outside /workspace and /tmp", async () => {
    const r = await run(
      box,
      "for p in /etc/x /usr/x /x /home/agent/x /var/x; do touch $p 2>/dev/null && echo WROTE $p; done; touch /workspace/ok /tmp/ok && echo fine",
    );
    assert.equal(r.stdout.includes("WROTE"), false, r.stdout);
    assert.match(r.stdout, /fine/);
  });

  it("has no network", async () => {
    const r = await run(
      box,
      "nc -w 2 1.1.1.1 80 </dev/null && echo CONNECTED; ip link 2>/dev/null | grep -c 'state UP' || true; cat /proc/net/dev | grep -v -E 'lo:|Inter|face' | wc -l",
    );
    assert.equal(r.stdout.includes("CONNECTED"), false);
    assert.match(
      r.stdout.trim().split("\n").pop() ?? "",
      /^0$/,
      "only the loopback interface exists",
    );
  });

  it("sees neither the Docker socket nor other runs' processes", async () => {
    const other = await sandbox.create({
      runId: ulid(),
      tenantId: "globex",
      image,
      limits: TEST_LIMITS,
      network: "none",
    });
    try {
      const bg = other.exec({ argv: ["sleep", "4242"], timeoutMs: 3000, maxOutputBytes: 1024 });
      await new Promise((r) => setTimeout(r, 300));
      const inOther = await run(other, "ps -o args | grep -c '^sleep 4242$' || true");
      assert.equal(inOther.stdout.trim(), "1", "the other sandbox runs it");
      const r = await run(
        box,
        "ls /var/run/docker.sock /run/docker.sock 2>&1; ps -o args | grep -c '^sleep 4242$'; ls /proc | grep -c '^[0-9]'",
      );
      assert.match(r.stdout, /No such file/);
      const [, seen, procs] = r.stdout.trim().split("\n").slice(-3);
      assert.equal(seen, "0", "this sandbox cannot see it");
      assert.ok(Number(procs) < 15, `few processes visible: ${procs}`);
      await bg;
    } finally {
      await other.destroy();
    }
  });
});

describe("limits", () => {
  it("kills a command past its timeout, with its whole process group", async () => {
    // That the call returns before sleep 32 ends is the timeout firing (r.timedOut).
    const r = await run(box, "sleep 30 & sleep 31 & sleep 32", { timeoutMs: 800 });
    assert.equal(r.timedOut, true);
    const ps = await run(box, "ps -o args | grep -c '^sleep 3[012]' || true");
    assert.equal(ps.stdout.trim(), "0", "no child survived");
  });

  it("caps the output of yes with a visible marker and stops it", async () => {
    const r = await run(box, "yes", { maxOutputBytes: 10_000 });
    assert.equal(r.truncated, true);
    assert.match(r.stdout, /\[agentd: output truncated at 10000 bytes/);
    assert.ok(r.stdout.length < 10_200);
    const ps = await run(box, "ps -o args | grep -c '^yes' || true");
    assert.equal(ps.stdout.trim(), "0");
  });

  it("stops a fork bomb at the pids limit and stays usable", async () => {
    const r = await run(box, "b(){ b|b& }; b 2>/dev/null; sleep 5", { timeoutMs: 3000 });
    // The bomb's own shell may exit 0 (busybox runs `sleep` in-process) while its children
    // hold the output open until the kill: a timeout or a failure, never a clean result.
    assert.ok(r.timedOut || r.exitCode !== 0, JSON.stringify(r));
    const after = await run(box, "echo alive; ps | wc -l");
    assert.equal(after.exitCode, 0, after.stderr);
    assert.match(after.stdout, /alive/);
    assert.ok(Number(after.stdout.trim().split("\n")[1]) < 15, "the bomb is gone");
  });

  it("reports a memory bomb as OOM-killed", async () => {
    const r = await run(box, "x=$(head -c 400m /dev/zero | tr '\\0' a); echo survived", {
      timeoutMs: 30_000,
    });
    assert.equal(r.oomKilled, true, JSON.stringify({ ...r, stdout: r.stdout.slice(0, 200) }));
    assert.equal(r.stdout.includes("survived"), false);
  });

  it("streams output as it comes and passes stdin", async () => {
    const chunks: string[] = [];
    const r = await run(box, "echo one; sleep 0.3; echo two >&2; sleep 0.3; cat", {
      stdin: Buffer.from("piped\n"),
      onOutput: (s, c) => chunks.push(`${s}:${c}`),
    });
    assert.equal(r.exitCode, 0);
    assert.deepEqual(chunks, ["stdout:one\n", "stderr:two\n", "stdout:piped\n"]);
  });

  it("cancels a running command when its signal aborts", async () => {
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 300);
    const r = await run(box, "sleep 20", { signal: ac.signal });
    assert.equal(r.cancelled, true);
  });
});

describe("workspace", () => {
  it("copies a host directory in (never mounts it) and leaves the host unchanged", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agentd-hostws-"));
    try {
      writeFileSync(join(dir, "a.txt"), "original\n");
      const fingerprint = () =>
        readdirSync(dir)
          .sort()
          .map(
            (f) =>
              `${f}:${statSync(join(dir, f)).mtimeMs}:${createHash("sha256")
                .update(readFileSync(join(dir, f)))
                .digest("hex")}`,
          )
          .join("|");
      const beforeFp = fingerprint();
      const tar = await packWorkspace(await readHostDirectory(dir));
      const h = await sandbox.create({
        runId: ulid(),
        tenantId: "acme",
        image,
        limits: TEST_LIMITS,
        network: "none",
        workspaceTar: tar,
      });
      try {
        const r = await run(h, "echo changed > a.txt; echo new > b.txt; cat a.txt");
        assert.equal(r.stdout, "changed\n");
        assert.equal(fingerprint(), beforeFp, "the host directory is unchanged");
        const d = await h.diff();
        assert.deepEqual(d.modified, ["a.txt"]);
        assert.deepEqual(d.added, ["b.txt"]);
        assert.match(
          d.patch,
          /^diff --git a\/a.txt b\/a.txt\n--- a\/a.txt\n\+\+\+ b\/a.txt\n@@ -1,1 \+1,1 @@\n-original\n\+changed\n/,
        );
        // The diff applies to the original with git apply.
        const { execFileSync } = await import("node:child_process");
        execFileSync("git", ["init", "-q"], { cwd: dir });
        writeFileSync(join(dir, "p.diff"), d.patch);
        execFileSync("git", ["apply", "p.diff"], { cwd: dir });
        assert.equal(readFileSync(join(dir, "a.txt"), "utf8"), "changed\n");
        assert.equal(readFileSync(join(dir, "b.txt"), "utf8"), "new\n");
        const out = await collect(h.exportWorkspace());
        assert.ok(out.includes(Buffer.from("changed\n")));
      } finally {
        await h.destroy();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses hostile archives with typed errors", async () => {
    const cases: [string, Promise<Buffer>, RegExp][] = [
      ["absolute path", tarOf([{ name: "/etc/passwd", data: "x" }]), /absolute path/],
      ["tar-slip", tarOf([{ name: "a/../../evil", data: "x" }]), /tar-slip/],
      [
        "symlink out",
        tarOf([{ name: "l", type: "symlink", linkname: "../../etc" }]),
        /outside the workspace/,
      ],
      [
        "absolute symlink",
        tarOf([{ name: "l", type: "symlink", linkname: "/etc/passwd" }]),
        /absolute path/,
      ],
      ["device", tarOf([{ name: "dev", type: "character-device" }]), /character-device/],
      ["hard link", tarOf([{ name: "h", type: "link", linkname: "x" }]), /hard link/],
    ];
    for (const [what, tar, re] of cases) {
      await assert.rejects(
        normaliseWorkspaceArchive(await tar),
        (e) => isAgentdError(e, "EVALIDATION") && re.test((e as Error).message),
        what,
      );
    }
    await assert.rejects(
      normaliseWorkspaceArchive(Buffer.from("definitely not a tar archive, just text".repeat(20))),
      /not a tar archive/,
    );
    await assert.rejects(
      normaliseWorkspaceArchive(Buffer.alloc(2048), { maxArchiveBytes: 1024 }),
      (e) => isAgentdError(e, "ETOOLARGE"),
    );
  });

  it("refuses an unknown image with ENOTFOUND", async () => {
    await assert.rejects(
      sandbox.create({
        runId: ulid(),
        tenantId: "acme",
        image: "agentd-no-such-image:nope",
        limits: TEST_LIMITS,
        network: "none",
      }),
      (e) => isAgentdError(e, "ENOTFOUND") && /make images/.test((e as Error).message),
    );
  });
});

describe("reaper", () => {
  it("removes containers whose run is gone and keeps live ones", async () => {
    const dead = await sandbox.create({
      runId: ulid(),
      tenantId: "acme",
      image,
      limits: TEST_LIMITS,
      network: "none",
    });
    const reaped = await sandbox.reap((runId) => runId !== dead.runId);
    assert.deepEqual(reaped, [dead.runId]);
    await assert.rejects(docker.getContainer(dead.id).inspect(), /no such container/i);
    const still = await docker.listContainers({ filters: { label: [`${LABEL_MANAGED}`] } });
    assert.ok(
      still.some((c) => c.Id === box.id),
      "the live run's container stays",
    );
    assert.equal((await sandbox.find(box.runId))?.id, box.id);
  });
});

describe("warm containers", () => {
  const shape = () => ({ image, limits: TEST_LIMITS, network: "none" as const });

  it("hands a started, hardened container to a run, renamed for it, and refills the pool", async () => {
    const label = `test-warm-${ulid().toLowerCase()}`;
    const owner = `owner-${ulid().toLowerCase()}`;
    const warm = createDockerSandbox({ docker, managedLabel: label, warm: 1, poolOwner: owner });
    const pooled = async () =>
      (await docker.listContainers({ all: true, filters: { label: [`${LABEL_POOL}=${owner}`] } }))
        .filter((c) => c.Names.some((n) => n.includes(".pool.")))
        .map((c) => c.Id);
    try {
      await warm.prewarm(shape());
      const [ready, ...more] = await pooled();
      assert.ok(ready !== undefined && more.length === 0, "one warm container");
      const runId = ulid();
      const tar = await packWorkspace([
        { path: "w.txt", type: "file", mode: 0o644, data: Buffer.from("warm\n") },
      ]);
      const h = await warm.create({ ...shape(), runId, tenantId: "acme", workspaceTar: tar });
      assert.equal(h.id, ready, "the warm container was taken");
      const info = await docker.getContainer(h.id).inspect();
      assert.equal(info.Name, `/${containerName(label, runId)}`);
      assert.equal(info.HostConfig.ReadonlyRootfs, true);
      assert.deepEqual(info.HostConfig.CapDrop, ["ALL"]);
      assert.equal(info.HostConfig.NetworkMode, "none");
      assert.equal(
        info.HostConfig.Memory,
        TEST_LIMITS.memoryBytes + (TEST_LIMITS.workspaceBytes as number),
      );
      const r = await run(h, "id -u; cat w.txt; ls -ln w.txt | awk '{print $3}'");
      assert.equal(r.stdout, "1000\nwarm\n1000\n");
      assert.equal((await warm.find(runId))?.id, h.id, "found by the run's name");
      // The diff is against the workspace the run got (exported through PID 1).
      await run(h, "echo more >> w.txt; mkdir -p d && printf 'x' > d/new.bin");
      const d = await h.diff();
      assert.deepEqual([d.modified, d.added], [["w.txt"], ["d/new.bin"]]);
      // A file the sandbox user cannot read: tar in the sandbox fails, the engine's archive
      // API (root) still exports everything.
      await run(h, "printf 'secret' > locked.txt && chmod 000 locked.txt");
      assert.deepEqual((await h.diff()).added.sort(), ["d/new.bin", "locked.txt"]);
      // Refilled behind the take.
      for (let i = 0; i < 100 && (await pooled()).filter((id) => id !== h.id).length === 0; i++)
        await new Promise((r) => setTimeout(r, 50));
      assert.equal((await pooled()).filter((id) => id !== h.id).length, 1, "refilled");
      // A snapshot the engine exported from a cold container (getArchive) unpacks in a
      // warm one, as when a paused run resumes.
      await run(box, "mkdir -p snap/sub && echo deep > snap/sub/f.txt && chmod 755 snap");
      const snapshot = await collect(box.exportWorkspace());
      await warm.prewarm(shape());
      const resumed = await warm.create({
        ...shape(),
        runId: ulid(),
        tenantId: "acme",
        workspaceTar: snapshot,
      });
      const resumedInfo = await docker.getContainer(resumed.id).inspect();
      assert.equal(resumedInfo.Config.Labels[LABEL_POOL], owner, "a warm one");
      assert.equal((await run(resumed, "cat hello.txt snap/sub/f.txt")).stdout, "hi\ndeep\n");
      assert.deepEqual((await resumed.diff()).added, []);
      await resumed.destroy();
      // A run without a workspace gets an empty one, warm too.
      await warm.prewarm(shape());
      const empty = await warm.create({ ...shape(), runId: ulid(), tenantId: "acme" });
      const emptyInfo = await docker.getContainer(empty.id).inspect();
      assert.equal(emptyInfo.Config.Labels[LABEL_POOL], owner, "a warm one");
      assert.equal((await run(empty, "ls -A /workspace | wc -l")).stdout.trim(), "0");
      await empty.destroy();
      // A run never gets a container of another shape.
      const other = await warm.create({
        ...shape(),
        limits: { ...TEST_LIMITS, pids: 48 },
        runId: ulid(),
        tenantId: "acme",
      });
      assert.equal((await docker.getContainer(other.id).inspect()).HostConfig.PidsLimit, 48);
      await other.destroy();
      await h.destroy();
    } finally {
      await warm.close();
      assert.deepEqual(await pooled(), [], "close() removes the idle warm containers");
      await warm.reap(() => false);
    }
  });

  it("without the agent, a sandbox writing to its PID 1's pipe only loses its own channel: exports still work, nothing is logged", async () => {
    const label = `test-warm-${ulid().toLowerCase()}`;
    const warm = createDockerSandbox({ docker, managedLabel: label, warm: 1, agent: false });
    try {
      await warm.prewarm(shape());
      const tar = await packWorkspace([
        { path: "a.txt", type: "file", mode: 0o644, data: Buffer.from("a\n") },
      ]);
      const h = await warm.create({
        ...shape(),
        runId: ulid(),
        tenantId: "acme",
        workspaceTar: tar,
      });
      assert.equal((await docker.getContainer(h.id).inspect()).HostConfig.LogConfig?.Type, "none");
      // The control loop's stdout (the child of the init whose script has '= export'),
      // from inside: 8 MB of junk and a forged trailer.
      const r = await run(
        h,
        `for p in /proc/[0-9]*; do grep -q '= export' "$p/cmdline" 2>/dev/null &&
           [ "$(cut -d' ' -f4 "$p/stat")" = 1 ] && t="$p"; done
         [ -n "$t" ] || exit 9
         head -c 8000000 /dev/zero > "$t/fd/1" && printf '\\nagentd-done x 0\\n' > "$t/fd/1" && echo wrote`,
      );
      assert.equal(r.stdout.trim(), "wrote", r.stderr);
      await run(h, "echo b > b.txt");
      const d = await h.diff();
      assert.deepEqual(d.added, ["b.txt"]);
      assert.deepEqual(d.modified, []);
      await h.destroy();
    } finally {
      await warm.close();
      await warm.reap(() => false);
    }
  });

  it("reap() removes another process's abandoned warm containers, never its own", async () => {
    const label = `test-warm-${ulid().toLowerCase()}`;
    const mine = createDockerSandbox({ docker, managedLabel: label, warm: 1, poolOwner: "a" });
    // Another process of the same deployment, an hour later.
    const later = createDockerSandbox({
      docker,
      managedLabel: label,
      warm: 1,
      poolOwner: "b",
      now: () => Date.now() + 60 * 60_000,
    });
    const warmOf = async (owner: string) =>
      (await docker.listContainers({ all: true, filters: { label: [`${LABEL_POOL}=${owner}`] } }))
        .length;
    try {
      await mine.prewarm(shape());
      assert.equal(await warmOf("a"), 1);
      await mine.reap(() => false);
      assert.equal(await warmOf("a"), 1, "its own warm container stays");
      await later.reap(() => true);
      assert.equal(await warmOf("a"), 0, "an hour-old warm container of a dead process goes");
    } finally {
      await mine.close();
      await later.close();
      await mine.reap(() => false);
    }
  });

  it("find() removes a stopped container (its tmpfs workspace is gone) and finds none", async () => {
    const runId = ulid();
    const h = await sandbox.create({ ...shape(), runId, tenantId: "acme" });
    await run(h, "echo work > done.txt");
    await docker.getContainer(h.id).kill();
    assert.equal(await sandbox.find(runId), undefined, "the caller starts over from a snapshot");
    await assert.rejects(docker.getContainer(h.id).inspect(), /no such container/i);
  });

  it("a container restarted since its fill is lost to its handle and not found: running again, its tmpfs workspace empty", async () => {
    const runId = ulid();
    const h = await sandbox.create({ ...shape(), runId, tenantId: "acme" });
    await run(h, "echo work > done.txt");
    assert.equal(await h.lost?.(), false, "a filled, running container is not lost");
    // Found by another owner before the restart: the mark is there, the workspace too.
    const before = await sandbox.find(runId);
    assert.equal(before?.id, h.id);
    before?.detach?.();
    await docker.getContainer(h.id).restart({ t: 1 });
    assert.equal((await docker.getContainer(h.id).inspect()).State.Running, true);
    assert.equal(await h.lost?.(), true, "the handle sees the restart");
    assert.equal(await sandbox.find(runId), undefined, "never taken for the run's workspace");
    await assert.rejects(docker.getContainer(h.id).inspect(), /no such container/i);
  });

  it("a container named for its run whose fill never ended is not found", async () => {
    const runId = ulid();
    const h = await sandbox.create({ ...shape(), runId, tenantId: "acme" });
    // As a worker dying between the name and the end of the fill leaves it.
    execFileSync("docker", ["exec", "-u", "0:0", h.id, "rm", `${MARK_DIR}/filled`]);
    h.detach?.();
    assert.equal(await sandbox.find(runId), undefined);
    await assert.rejects(docker.getContainer(h.id).inspect(), /no such container/i);
  });

  it("without the agent (docker exec per call): a restart fails the next call instead of running it in the empty workspace, found handles too", async () => {
    const loop = await testSandbox({ agent: false });
    try {
      const runId = ulid();
      const h = await loop.sandbox.create({ ...shape(), runId, tenantId: "acme" });
      await run(h, "echo work > done.txt");
      const found = (await loop.sandbox.find(runId)) as SandboxHandle;
      assert.equal((await run(found, "cat done.txt")).stdout, "work\n");
      await docker.getContainer(h.id).restart({ t: 1 });
      for (const handle of [h, found])
        await assert.rejects(
          run(handle, "echo new > after.txt"),
          /restarted \(its workspace is empty\)/,
        );
      const ls = await docker.getContainer(h.id).exec({
        Cmd: ["ls", "-A", "/workspace"],
        AttachStdout: true,
      });
      const out = await new Promise<string>((resolve, reject) => {
        ls.start({}, (err, stream) => {
          if (err || stream === undefined) return reject(err);
          let text = "";
          stream.on("data", (b: Buffer) => {
            text += b.toString("latin1");
          });
          stream.on("end", () => resolve(text));
        });
      });
      assert.doesNotMatch(out, /after\.txt/, "nothing ran in the restarted container");
      assert.equal(await h.lost?.(), true);
    } finally {
      await loop.cleanup();
    }
  });
});
