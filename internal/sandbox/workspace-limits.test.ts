/**
 * /workspace is bounded inside the container, and the workspace comes out as a stream that
 * never sits whole in the worker's memory, against the real engine.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type Docker from "dockerode";
import * as tar from "tar-stream";
import { ulid } from "ulid";
import { isAgentdError } from "../errors.ts";
import { detachAndSettle } from "../testing/agent-detach.ts";
import { sandboxImage, TEST_LIMITS, testSandbox } from "../testing/docker.ts";
import { collect } from "./collect.ts";
import { DockerSandboxHandle } from "./docker-handle.ts";
import type { Sandbox, SandboxHandle, SandboxLimits } from "./port.ts";
import { packWorkspace } from "./workspace-archive.ts";

let docker: Docker;
let sandbox: Sandbox;
let cleanup: () => Promise<void>;
const MiB = 1024 * 1024;

const sh = (h: SandboxHandle, cmd: string, timeoutMs = 30_000) =>
  h.exec({ argv: ["sh", "-c", cmd], timeoutMs, maxOutputBytes: 64 * 1024 });
const box = (limits: Partial<SandboxLimits> = {}, workspaceTar?: Uint8Array) =>
  sandbox.create({
    runId: ulid(),
    tenantId: "acme",
    image: sandboxImage("test"),
    limits: { ...TEST_LIMITS, ...limits },
    network: "none",
    ...(workspaceTar === undefined ? {} : { workspaceTar }),
  });

/** The entries of a tar stream: path → size. */
async function entries(source: AsyncIterable<Uint8Array>): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  const extract = tar.extract();
  const done = new Promise<void>((resolve, reject) => {
    extract.on("entry", (h, stream, next) => {
      out.set(h.name.replace(/^\.\//, ""), h.size ?? 0);
      stream.on("end", next);
      stream.resume();
    });
    extract.on("finish", () => resolve());
    extract.on("error", reject);
  });
  for await (const c of source) extract.write(c);
  extract.end(() => undefined);
  await done;
  return out;
}

before(async () => {
  ({ docker, sandbox, cleanup } = await testSandbox());
});
after(async () => {
  await cleanup();
});

describe("sandbox.workspaceSize", () => {
  it("a write past the size fails in the container with ENOSPC", async () => {
    const h = await box({ workspaceBytes: 8 * MiB });
    try {
      const r = await sh(
        h,
        "dd if=/dev/zero of=/workspace/big bs=1M count=20 2>&1; df -k /workspace | tail -1",
      );
      assert.match(r.stdout, /No space left on device/);
      const used = Number(r.stdout.trim().split(/\s+/).at(-4));
      assert.ok(used <= 8 * 1024, `at most 8 MiB used: ${used} KiB`);
      // The run can still remove what it wrote and go on.
      assert.equal((await sh(h, "rm big && echo ok > small && cat small")).stdout, "ok\n");
    } finally {
      await h.destroy();
    }
  });

  it("millions of empty files stop at the inode cap", async () => {
    const h = await box({ workspaceBytes: 8 * MiB });
    try {
      const r = await sh(
        h,
        "i=0; while [ $i -lt 40000 ]; do true > f$i 2>/dev/null || { echo stopped at $i; break; }; i=$((i+1)); done",
        60_000,
      );
      assert.match(r.stdout, /stopped at \d+/);
      const n = Number(/stopped at (\d+)/.exec(r.stdout)?.[1]);
      assert.ok(n <= 16_384, `inodes capped: ${n}`);
    } finally {
      await h.destroy();
    }
  });
});

describe("workspace export", () => {
  it("streams the same tar through the control channel and through docker exec", async () => {
    const ws = await packWorkspace([
      { path: "a.txt", type: "file", mode: 0o644, data: Buffer.from("a\n") },
      { path: "d/b.bin", type: "file", mode: 0o600, data: Buffer.alloc(300_000, 7) },
    ]);
    const h = await box({}, ws);
    try {
      // A file the sandbox user made unreadable for itself still comes out.
      await sh(h, "echo hidden > h.txt && chmod 000 h.txt");
      const viaChannel = await entries(h.exportWorkspace());
      await detachAndSettle(docker, h); // no channel any more: the exec path serves
      const viaExec = await entries(h.exportWorkspace());
      assert.deepEqual(viaExec, viaChannel);
      assert.equal(viaChannel.get("d/b.bin"), 300_000);
      assert.equal(viaChannel.get("h.txt"), 7);
    } finally {
      await h.destroy();
    }
  });

  it("an export past the handle's cap fails with ETOOLARGE", async () => {
    const h = await box();
    try {
      await sh(h, "head -c 2000000 /dev/zero > z");
      const capped = new DockerSandboxHandle(docker.getContainer(h.id), h.runId, {
        maxExportBytes: MiB,
      });
      await assert.rejects(collect(capped.exportWorkspace()), (err) =>
        isAgentdError(err, "ETOOLARGE"),
      );
    } finally {
      await h.destroy();
    }
  });

  it("a big workspace streams out without growing the worker's memory by its size", async () => {
    const h = await box({ workspaceBytes: 400 * MiB, memoryBytes: 64 * MiB });
    try {
      const w = await sh(h, "head -c 300000000 /dev/urandom > big && echo ok", 60_000);
      assert.equal(w.stdout, "ok\n", w.stderr);
      for (const path of ["channel", "exec"]) {
        if (path === "exec") await detachAndSettle(docker, h);
        globalThis.gc?.();
        const rss0 = process.memoryUsage().rss;
        let peak = rss0;
        let bytes = 0;
        for await (const c of h.exportWorkspace()) {
          bytes += c.byteLength;
          // A slow consumer: backpressure must hold the container back, not buffer here.
          if (bytes % (16 * MiB) < c.byteLength) await new Promise((r) => setTimeout(r, 20));
          peak = Math.max(peak, process.memoryUsage().rss);
        }
        assert.ok(bytes > 300_000_000, `${path}: the whole workspace came out (${bytes})`);
        const grew = (peak - rss0) / MiB;
        // Buffering the export would grow RSS by its size (~286 MiB); half of that is the
        // bound (RSS counts freed memory the allocator keeps, more so on a loaded machine).
        assert.ok(grew < 150, `${path}: RSS grew ${grew.toFixed(0)} MiB for a 300 MB export`);
      }
    } finally {
      await h.destroy();
    }
  });

  it("a workspace streams in from a source of known size", async () => {
    const files = Array.from({ length: 50 }, (_, i) => ({
      path: `f${i}.txt`,
      type: "file" as const,
      mode: 0o644,
      data: Buffer.from(`file ${i}\n`.repeat(1000)),
    }));
    const ws = await packWorkspace(files);
    const h = await sandbox.create({
      runId: ulid(),
      tenantId: "acme",
      image: sandboxImage("test"),
      limits: TEST_LIMITS,
      network: "none",
      workspace: {
        size: ws.byteLength,
        async *open() {
          for (let i = 0; i < ws.byteLength; i += 4096) yield ws.subarray(i, i + 4096);
        },
      },
    });
    try {
      const r = await sh(h, "ls | wc -l; cat f49.txt | wc -l");
      assert.equal(r.stdout, "50\n1000\n");
    } finally {
      await h.destroy();
    }
  });
});
