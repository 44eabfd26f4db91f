/**
 * UploadWorkspace against a real `agentd server` (private Redis, grpc-js client streaming):
 * a 200 MiB workspace streams in with the server's RSS bounded, the same tree uploaded
 * twice is stored once, CreateRun references it by digest (only its own tenant's), and
 * an upload that stops half way stores nothing.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as tarStream from "tar-stream";
import { type Stack, startStack, TOKENS } from "../testing/api-fixtures.ts";
import { assertGrpcError, GrpcRunClient, grpc } from "../testing/grpc-run-client.ts";

const MiB = 1024 * 1024;
let stack: Stack;
before(async () => {
  stack = await startStack();
});
after(async () => {
  await stack?.stop();
});

/** A tar of `files` files of 4 MiB each (incompressible, the same bytes for the same seed). */
async function* workspaceTar(files: number, seed: Buffer[]): AsyncGenerator<Uint8Array> {
  const pack = tarStream.pack();
  const writing = (async () => {
    for (let i = 0; i < files; i++) {
      await new Promise<void>((resolve, reject) => {
        const e = pack.entry({ name: `data/f${i}.bin`, size: 4 * MiB, mode: 0o644 }, (err) =>
          err ? reject(err) : resolve(),
        );
        void (async () => {
          for (let j = 0; j < 4; j++)
            if (!e.write(seed[(i * 4 + j) % seed.length]))
              await new Promise<void>((r) => e.once("drain", () => r()));
          (e as unknown as NodeJS.WritableStream).end();
        })().catch(reject);
      });
    }
    pack.finalize();
  })();
  let finished = false;
  try {
    for await (const c of pack) yield c as Uint8Array;
    finished = true;
  } finally {
    // A consumer that stops early destroys the pack: the writer's error is expected then.
    if (finished) await writing;
    else {
      pack.destroy();
      await writing.catch(() => undefined);
    }
  }
}

/** In 1 MiB messages. */
async function* rechunk(src: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  let buf = Buffer.alloc(0);
  for await (const c of src) {
    buf = Buffer.concat([buf, c]);
    while (buf.length >= MiB) {
      yield buf.subarray(0, MiB);
      buf = buf.subarray(MiB);
    }
  }
  if (buf.length > 0) yield buf;
}

const rssOf = (pid: number): number =>
  Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) * 1024;

const blobs = (): string[] =>
  readdirSync(join(stack.dir, "artifacts", "sha256"), { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile())
    .map((d) => d.name);

describe("UploadWorkspace", { timeout: 180_000 }, () => {
  const seed = Array.from({ length: 8 }, () => randomBytes(MiB));
  let digest = "";

  it("streams a 200 MiB workspace in with the server's RSS bounded", async () => {
    const pid = stack.server.pid;
    const base = rssOf(pid);
    let peak = base;
    const sampler = setInterval(() => {
      peak = Math.max(peak, rssOf(pid));
    }, 50);
    const t0 = performance.now();
    try {
      const res = await stack.client.uploadWorkspace(rechunk(workspaceTar(50, seed)));
      digest = res.digest;
      assert.match(digest, /^[0-9a-f]{64}$/);
      assert.ok(Number(res.sizeBytes) > 200 * MiB, String(res.sizeBytes));
    } finally {
      clearInterval(sampler);
    }
    const secs = (performance.now() - t0) / 1000;
    console.log(
      `upload: 200 MiB in ${secs.toFixed(1)} s (${(200 / secs).toFixed(0)} MiB/s); server RSS +${((peak - base) / MiB).toFixed(0)} MiB at peak`,
    );
    assert.ok(peak - base < 120 * MiB, `server RSS grew ${(peak - base) / MiB} MiB`);
  });

  it("the same tree uploaded again is stored once", async () => {
    const before = blobs().filter((b) => b === digest).length;
    const again = await stack.client.uploadWorkspace(rechunk(workspaceTar(50, seed)));
    assert.equal(again.digest, digest);
    assert.equal(before, 1);
    assert.equal(blobs().filter((b) => b === digest).length, 1);
  });

  it("CreateRun takes the digest of the tenant's own upload; another tenant's is NOT_FOUND", async () => {
    const { run } = await stack.client.createRun({ prompt: "big repo", workspaceDigest: digest });
    assert.equal(run?.workspaceDigest, digest);
    const other = new GrpcRunClient(stack.server.addr, TOKENS.globex);
    try {
      await assertGrpcError(
        other.createRun({ prompt: "steal", workspaceDigest: digest }),
        grpc.status.NOT_FOUND,
        /workspace_digest: no workspace of yours has digest/,
      );
    } finally {
      other.close();
    }
    await assertGrpcError(
      stack.client.createRun({ prompt: "p", workspaceDigest: "nothex" }),
      grpc.status.INVALID_ARGUMENT,
      /workspace_digest: must be a sha256/,
    );
    await assertGrpcError(
      stack.client.createRun({
        prompt: "p",
        workspaceDigest: digest,
        workspaceTar: Buffer.from("x"),
      }),
      grpc.status.INVALID_ARGUMENT,
      /workspace_digest: give workspace_tar or workspace_digest, not both/,
    );
  });

  it("an upload that stops half way stores nothing; a bad archive is refused naming it", async () => {
    const before = blobs();
    const other = Array.from({ length: 8 }, () => randomBytes(MiB));
    await assert.rejects(
      stack.client.uploadWorkspace(rechunk(workspaceTar(20, other)), { abortAfter: 30 }),
      (err: grpc.ServiceError) => err.code === grpc.status.CANCELLED,
    );
    await new Promise((r) => setTimeout(r, 500));
    assert.deepEqual(blobs().sort(), before.sort(), "no blob, no receipt");
    assert.deepEqual(readdirSync(join(stack.dir, "artifacts", "tmp")), [], "no temp file left");
    await assertGrpcError(
      stack.client.uploadWorkspace([Buffer.from("not a tar archive at all".repeat(100))]),
      grpc.status.INVALID_ARGUMENT,
      /workspace_tar/,
    );
    await assertGrpcError(
      stack.client.uploadWorkspace([]),
      grpc.status.INVALID_ARGUMENT,
      /chunk|workspace/,
    );
  });
});
