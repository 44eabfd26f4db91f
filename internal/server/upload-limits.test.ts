/**
 * CreateRun's workspace against a real `agentd server` (port 0, private Redis, grpc-js):
 * gzip bombs cannot blow up the server's memory (its RSS is read from /proc every 20 ms and
 * its kernel high-water mark checked), every limit answers RESOURCE_EXHAUSTED naming itself
 * and its flag, hostile formats INVALID_ARGUMENT, nothing is stored for a refused archive,
 * unpacks beyond --max-concurrent-unpacks wait within their deadline, and a normal upload
 * still works afterwards.
 */
import assert from "node:assert/strict";
import { once } from "node:events";
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createGzip, gzipSync } from "node:zlib";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import * as tar from "tar-stream";
import {
  type CreateRunRequest,
  CreateRunRequestSchema,
  CreateRunResponseSchema,
} from "../gen/agentd/v1/run_service_pb.js";
import type { AgentdProcess } from "../testing/agentd-process.ts";
import { type Stack, startStack, TOKENS } from "../testing/api-fixtures.ts";
import { assertGrpcError, GrpcRunClient, grpc } from "../testing/grpc-run-client.ts";

const MiB = 1024 * 1024;

/** A ustar header block, written by hand (tar-stream is too slow for 200,000 entries). */
function header(name: string, size: number, typeflag = "0"): Buffer {
  const b = Buffer.alloc(512);
  b.write(name, 0, 100, "utf8");
  b.write("0000644\0", 100);
  b.write("0001750\0", 108);
  b.write("0001750\0", 116);
  b.write(`${size.toString(8).padStart(11, "0")}\0`, 124);
  b.write("00000000000\0", 136);
  b.write(typeflag, 156);
  b.write("ustar\0", 257);
  b.write("00", 263);
  b.fill(0x20, 148, 156);
  let sum = 0;
  for (const x of b) sum += x;
  b.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148);
  return b;
}

/** gzip -9 of a tar of files full of zeros, built without holding the tar. */
async function zeroBomb(files: readonly { name: string; size: number }[]): Promise<Buffer> {
  const gz = createGzip({ level: 9 });
  const out: Buffer[] = [];
  gz.on("data", (c: Buffer) => out.push(c));
  const ended = once(gz, "end");
  const write = async (b: Buffer): Promise<void> => {
    if (!gz.write(b)) await once(gz, "drain");
  };
  const block = Buffer.alloc(MiB);
  for (const f of files) {
    await write(header(f.name, f.size));
    for (let n = 0; n < f.size; n += MiB) await write(block.subarray(0, Math.min(MiB, f.size - n)));
  }
  await write(Buffer.alloc(1024));
  gz.end();
  await ended;
  return Buffer.concat(out);
}

async function tarOf(
  entries: readonly (Partial<tar.Header> & { name: string; data?: Buffer | string })[],
) {
  const pack = tar.pack();
  const out: Buffer[] = [];
  pack.on("data", (c: unknown) => out.push(c as Buffer));
  const ended = new Promise<void>((r) => pack.on("end", () => r()));
  for (const { data, ...h } of entries) pack.entry({ mode: 0o644, ...h }, data ?? "");
  pack.finalize();
  await ended;
  return Buffer.concat(out);
}

/** The server's resident memory, sampled every 20 ms, and its kernel high-water mark. */
class RssProbe {
  readonly #pid: number;
  readonly #timer: NodeJS.Timeout;
  readonly base: number;
  #peak: number;
  readonly #hwmReset: boolean;

  constructor(pid: number) {
    this.#pid = pid;
    // Resets VmHWM to the current RSS (Linux >= 4.0), so the kernel reports this
    // scenario's peak, spikes between samples included.
    try {
      writeFileSync(`/proc/${pid}/clear_refs`, "5");
      this.#hwmReset = true;
    } catch {
      this.#hwmReset = false;
    }
    this.base = this.#read("VmRSS");
    this.#peak = this.base;
    this.#timer = setInterval(() => {
      this.#peak = Math.max(this.#peak, this.#read("VmRSS"));
    }, 20);
  }

  #read(field: "VmRSS" | "VmHWM"): number {
    const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(
      readFileSync(`/proc/${this.#pid}/status`, "utf8"),
    );
    return Number(m?.[1] ?? 0) * 1024;
  }

  /** Stops sampling; the peak growth over the base, bytes. */
  stop(): { sampled: number; hwm: number | undefined } {
    clearInterval(this.#timer);
    const hwm = this.#hwmReset ? this.#read("VmHWM") - this.base : undefined;
    return { sampled: this.#peak - this.base, hwm };
  }
}

let stack: Stack;
let bombs: { single: Buffer; split: Buffer; entries: Buffer; zeros300: Buffer };

/** Blobs in the server's artifact store, and temp files left behind. */
function storeContents(): { blobs: number; temps: number } {
  const dir = join(stack.dir, "artifacts");
  const count = (d: string): number =>
    existsSync(d)
      ? readdirSync(d, { withFileTypes: true }).reduce(
          (n, e) => n + (e.isDirectory() ? count(join(d, e.name)) : 1),
          0,
        )
      : 0;
  return { blobs: count(join(dir, "sha256")), temps: count(join(dir, "tmp")) };
}

async function runCount(): Promise<number> {
  return (await stack.client.listRuns({ pageSize: 500 })).runs.length;
}

before(async () => {
  bombs = {
    // One 500 MiB file of zeros: the declared size is refused before any content.
    single: await zeroBomb([{ name: "zeros.bin", size: 500 * MiB }]),
    // Five 100 MiB files: each under the limit, so 256 MiB really stream through first.
    split: await zeroBomb([1, 2, 3, 4, 5].map((i) => ({ name: `zeros${i}.bin`, size: 100 * MiB }))),
    entries: gzipSync(
      Buffer.concat([
        ...Array.from({ length: 200_000 }, (_, i) => header(`f${i}`, 0)),
        Buffer.alloc(1024),
      ]),
      { level: 9 },
    ),
    zeros300: await zeroBomb([{ name: "sparse-looking.img", size: 300 * MiB }]),
  };
  for (const [name, b] of Object.entries(bombs))
    assert.ok(b.byteLength < 8 * MiB, `${name} bomb is ${b.byteLength} bytes`);
  stack = await startStack();
});

after(async () => {
  await stack?.stop();
});

/** Three concurrent CreateRuns of `bomb`, each on its own connection, under the probe. */
async function threeAtOnce(bomb: Buffer): Promise<{ growth: number; errors: grpc.ServiceError[] }> {
  const clients = [0, 1, 2].map(() => new GrpcRunClient(stack.server.addr, TOKENS.acme));
  const probe = new RssProbe(stack.server.pid);
  try {
    const results = await Promise.allSettled(
      clients.map((c) => c.createRun({ prompt: "bomb", workspaceTar: bomb })),
    );
    const { sampled, hwm } = probe.stop();
    const growth = Math.max(sampled, hwm ?? 0);
    process.stderr.write(
      `# RSS base ${(probe.base / 1e6).toFixed(1)} MB, peak growth sampled ${(sampled / 1e6).toFixed(1)} MB, kernel high-water ${hwm === undefined ? "n/a" : `${(hwm / 1e6).toFixed(1)} MB`}\n`,
    );
    const errors = results.map((r) => {
      assert.equal(r.status, "rejected", "a bomb was accepted");
      return (r as PromiseRejectedResult).reason as grpc.ServiceError;
    });
    return { growth, errors };
  } finally {
    for (const c of clients) c.close();
  }
}

function assertLimit(err: grpc.ServiceError, flag: RegExp): void {
  assert.equal(err.code, grpc.status.RESOURCE_EXHAUSTED, err.details);
  const message = decodeURIComponent(err.details);
  assert.match(message, /^workspace_tar: /);
  assert.match(message, flag);
}

describe("gzip bombs: bounded memory, RESOURCE_EXHAUSTED naming the limit", {
  timeout: 120_000,
}, () => {
  it("three concurrent 500 MiB bombs raise the server's RSS by less than 150 MB", async () => {
    const runs = await runCount();
    const before = storeContents();
    const { growth, errors } = await threeAtOnce(bombs.single);
    for (const e of errors) {
      assertLimit(e, /268435456 bytes \(the server's --max-workspace-bytes\)/);
    }
    assert.ok(growth < 150 * 1e6, `the server's RSS grew by ${(growth / 1e6).toFixed(1)} MB`);
    assert.equal(await runCount(), runs, "no run was created");
    assert.deepEqual(storeContents(), before, "nothing was stored, no temp file left");
  });

  it("three concurrent bombs of five 100 MiB files (256 MiB stream through each first)", async () => {
    const before = storeContents();
    const { growth, errors } = await threeAtOnce(bombs.split);
    for (const e of errors) assertLimit(e, /--max-workspace-bytes/);
    assert.ok(growth < 150 * 1e6, `the server's RSS grew by ${(growth / 1e6).toFixed(1)} MB`);
    assert.deepEqual(storeContents(), before, "nothing was stored, no temp file left");
  });

  it("200,000 empty files: RESOURCE_EXHAUSTED naming --max-workspace-entries", async () => {
    const probe = new RssProbe(stack.server.pid);
    const err = await assertGrpcError(
      stack.client.createRun({ prompt: "entries", workspaceTar: bombs.entries }),
      grpc.status.RESOURCE_EXHAUSTED,
    );
    const { sampled, hwm } = probe.stop();
    assertLimit(err, /more than 100000 entries \(the server's --max-workspace-entries\)/);
    const growth = Math.max(sampled, hwm ?? 0);
    process.stderr.write(`# RSS peak growth for 200,000 entries ${(growth / 1e6).toFixed(1)} MB\n`);
    assert.ok(growth < 150 * 1e6, `the server's RSS grew by ${(growth / 1e6).toFixed(1)} MB`);
  });

  it("a 300 MiB file of zeros (300 KB gzipped): RESOURCE_EXHAUSTED", async () => {
    const err = await assertGrpcError(
      stack.client.createRun({ prompt: "zeros", workspaceTar: bombs.zeros300 }),
      grpc.status.RESOURCE_EXHAUSTED,
    );
    assertLimit(err, /--max-workspace-bytes/);
  });

  it("a normal upload still works afterwards, and is stored once", async () => {
    const before = storeContents();
    const workspace = gzipSync(await tarOf([{ name: "src/a.txt", data: "hello" }]));
    const { run } = await stack.client.createRun({ prompt: "normal", workspaceTar: workspace });
    assert.match(run?.workspaceDigest ?? "", /^[0-9a-f]{64}$/);
    assert.deepEqual(storeContents(), { blobs: before.blobs + 1, temps: 0 });
  });
});

describe("hostile formats: INVALID_ARGUMENT naming workspace_tar", { timeout: 60_000 }, () => {
  async function refused(bytes: Buffer, re: RegExp): Promise<void> {
    const err = await assertGrpcError(
      stack.client.createRun({ prompt: "p", workspaceTar: bytes }),
      grpc.status.INVALID_ARGUMENT,
    );
    assert.match(decodeURIComponent(err.details), new RegExp(`^workspace_tar: .*${re.source}`));
  }

  it("truncated gzip, gzip of a non-tar, a GNU sparse file, a path over PATH_MAX", async () => {
    const runs = await runCount();
    const before = storeContents();
    const gz = gzipSync(await tarOf([{ name: "a.txt", data: "x".repeat(200_000) }]));
    await refused(gz.subarray(0, gz.byteLength - 100), /corrupt or truncated/);
    await refused(gzipSync(Buffer.from("just text, no tar\n".repeat(1000))), /not a tar archive/);
    const sparse = Buffer.concat([
      header("disk.img", 512, "S"),
      Buffer.alloc(512),
      Buffer.alloc(1024),
    ]);
    await refused(gzipSync(sparse), /unsupported kind of entry/);
    await refused(await tarOf([{ name: `${"d/".repeat(2100)}f`, data: "x" }]), /4096 bytes/);
    assert.equal(await runCount(), runs);
    assert.deepEqual(storeContents(), before);
  });

  it("a deep path within PATH_MAX and a tar inside the tar are accepted as they are", async () => {
    const deep = `${"d/".repeat(2000)}leaf.txt`;
    const inner = await tarOf([{ name: "../../../etc/evil", data: "x" }]);
    const { run } = await stack.client.createRun({
      prompt: "p",
      workspaceTar: gzipSync(
        await tarOf([
          { name: deep, data: "deep" },
          { name: "vendor/inner.tar", data: inner },
        ]),
      ),
    });
    const digest = run?.workspaceDigest ?? "";
    const stored = readFileSync(join(stack.dir, "artifacts", "sha256", digest.slice(0, 2), digest));
    const names: string[] = [];
    const ex = tar.extract();
    const done = (async () => {
      for await (const e of ex) {
        names.push(e.header.name);
        for await (const _ of e);
      }
    })();
    ex.end(stored);
    await done;
    assert.equal(names.length, 2000 + 1 + 2);
    assert.ok(names.includes(deep));
    assert.ok(names.includes("vendor/inner.tar"), "the inner tar is a file, not unpacked");
  });
});

describe("--max-concurrent-unpacks: extra uploads wait within their deadline", {
  timeout: 120_000,
}, () => {
  let server: AgentdProcess;

  before(async () => {
    // Set through the environment: every flag is also an AGENTD_* variable.
    server = await stack.startServer({
      env: { AGENTD_MAX_CONCURRENT_UNPACKS: "1", AGENTD_MAX_WORKSPACE_BYTES: String(1024 * MiB) },
    });
  });

  after(async () => {
    await server?.stop("SIGKILL");
  });

  /** CreateRun with a deadline, on its own grpc-js channel. */
  function createRunWithin(workspaceTar: Uint8Array, ms: number): Promise<unknown> {
    const client = new grpc.Client(server.addr, grpc.credentials.createInsecure());
    const md = new grpc.Metadata();
    md.set("authorization", `Bearer ${TOKENS.acme}`);
    return new Promise((resolve, reject) => {
      client.makeUnaryRequest(
        "/agentd.v1.RunService/CreateRun",
        (m: CreateRunRequest) => Buffer.from(toBinary(CreateRunRequestSchema, m)),
        (b: Buffer) => fromBinary(CreateRunResponseSchema, b),
        create(CreateRunRequestSchema, { prompt: "p", workspaceTar }),
        md,
        { deadline: Date.now() + ms },
        (err, out) => (err ? reject(err) : resolve(out)),
      );
    }).finally(() => client.close());
  }

  it("a second upload waits for the slot and ends at its deadline; later it goes through", async () => {
    const client = new GrpcRunClient(server.addr, TOKENS.acme);
    const runs = async (): Promise<number> =>
      (await client.listRuns({ pageSize: 500 })).runs.length;
    try {
      const before = await runs();
      // 500 MiB of zeros within the 1 GiB limit: the one slot is busy for a while.
      const slow = client.createRun({ prompt: "slow", workspaceTar: bombs.split });
      await new Promise((r) => setTimeout(r, 100));
      const small = gzipSync(await tarOf([{ name: "a.txt", data: "a" }]));
      await assertGrpcError(createRunWithin(small, 300), grpc.status.DEADLINE_EXCEEDED);
      const { run } = await slow;
      const digest = run?.workspaceDigest ?? "";
      const blob = join(stack.dir, "artifacts", "sha256", digest.slice(0, 2), digest);
      // The normalised tar: five headers, five files of 100 MiB, the end-of-archive blocks.
      assert.equal(statSync(blob).size, 500 * MiB + 5 * 512 + 1024);
      const after = (await createRunWithin(small, 10_000)) as {
        run?: { workspaceDigest: string };
      };
      assert.match(after.run?.workspaceDigest ?? "", /^[0-9a-f]{64}$/);
      // The upload that ran out of time made no run, even once the slot was free (the
      // wait itself giving up is semaphore.test.ts's).
      assert.equal(await runs(), before + 2);
    } finally {
      client.close();
    }
  });
});
