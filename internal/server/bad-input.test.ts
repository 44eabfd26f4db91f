/**
 * Integration tests of `agentd server` (real process, private Redis, grpc-js and raw TCP
 * clients) against bad input: every bad request gets its own precise error, and the server
 * keeps serving everyone else afterwards. Also the probes: /healthz, and /readyz following
 * Redis going away.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import net from "node:net";
import { after, before, describe, it } from "node:test";
import { gzipSync } from "node:zlib";
import { RunState } from "../gen/agentd/v1/run_service_pb.js";
import { HealthCheckResponse_ServingStatus } from "../gen/grpc/health/v1/health_pb.js";
import { startAgentd } from "../testing/agentd-process.ts";
import { type Stack, sleep, startStack, TOKENS } from "../testing/api-fixtures.ts";
import { assertGrpcError, GrpcRunClient, grpc } from "../testing/grpc-run-client.ts";
import { startRedis } from "../testing/redis-server.ts";
import { tarOf } from "../testing/tar.ts";

let stack: Stack;
let runId: string;
let serverExited = false;

before(async () => {
  stack = await startStack();
  void stack.server.exited.then(() => {
    serverExited = true;
  });
  const { run } = await stack.client.createRun({ prompt: "a good run" });
  assert.ok(run);
  runId = run.runId;
});

after(async () => {
  await stack?.stop();
});

/** The server still answers a good request, on a fresh connection too. */
async function assertStillServing(): Promise<void> {
  assert.equal(serverExited, false, `the server exited:\n${stack.server.output()}`);
  const { run } = await stack.client.getRun(runId);
  assert.equal(run?.runId, runId);
  const fresh = new GrpcRunClient(stack.server.addr, TOKENS.globex);
  try {
    await fresh.listRuns({});
  } finally {
    fresh.close();
  }
}

describe("bad requests get precise errors and harm no one", { timeout: 180_000 }, () => {
  it("empty prompt: INVALID_ARGUMENT naming prompt", async () => {
    for (const prompt of ["", "   \n"]) {
      await assertGrpcError(
        stack.client.createRun({ prompt }),
        grpc.status.INVALID_ARGUMENT,
        /\bprompt\b/,
      );
    }
    await assertStillServing();
  });

  it("a prompt over 64 KiB: INVALID_ARGUMENT naming prompt; exactly 64 KiB is fine", async () => {
    await assertGrpcError(
      stack.client.createRun({ prompt: "x".repeat(64 * 1024 + 1) }),
      grpc.status.INVALID_ARGUMENT,
      /\bprompt\b/,
    );
    // Bytes, not characters: 32 Ki two-byte characters plus one byte is over the limit.
    await assertGrpcError(
      stack.client.createRun({ prompt: `${"é".repeat(32 * 1024)}x` }),
      grpc.status.INVALID_ARGUMENT,
      /\bprompt\b/,
    );
    const { run } = await stack.client.createRun({ prompt: "y".repeat(64 * 1024) });
    assert.equal(run?.prompt.length, 64 * 1024);
    await assertStillServing();
  });

  it("a malformed run_id: INVALID_ARGUMENT naming run_id", async () => {
    for (const bad of ["nope", "../../etc/passwd", `${runId}0`, runId.toLowerCase(), ""]) {
      await assertGrpcError(stack.client.getRun(bad), grpc.status.INVALID_ARGUMENT, /\brun_id\b/);
    }
    const s = stack.client.streamEvents({ runId: "not a run id" });
    const end = await s.end();
    assert.equal(end.status.code, grpc.status.INVALID_ARGUMENT);
    assert.match(end.status.details, /\brun_id\b/);
    await assertStillServing();
  });

  it("an unknown enum value (ListRuns state 99): INVALID_ARGUMENT naming state", async () => {
    await assertGrpcError(
      stack.client.listRuns({ state: 99 as RunState }),
      grpc.status.INVALID_ARGUMENT,
      /\bstate\b/,
    );
    const ok = await stack.client.listRuns({ state: RunState.QUEUED });
    assert.ok(ok.runs.some((r) => r.runId === runId));
    await assertStillServing();
  });

  it("a 10 MB CreateRun: RESOURCE_EXHAUSTED", async () => {
    const before = (await stack.client.listRuns({ pageSize: 500 })).runs.length;
    await assertGrpcError(
      stack.client.createRun({ prompt: "big", workspaceTar: new Uint8Array(10 * 1024 * 1024) }),
      grpc.status.RESOURCE_EXHAUSTED,
    );
    await assertGrpcError(
      stack.client.createRun({ prompt: "z".repeat(10 * 1024 * 1024) }),
      grpc.status.RESOURCE_EXHAUSTED,
    );
    // Nothing was stored for them.
    assert.equal((await stack.client.listRuns({ pageSize: 500 })).runs.length, before);
    await assertStillServing();
  });

  it("hostile workspace archives: INVALID_ARGUMENT naming workspace_tar, nothing stored", async () => {
    const before = (await stack.client.listRuns({ pageSize: 500 })).runs.length;
    const slip = await tarOf([{ name: "src/../../evil.sh", data: "x" }]);
    const abs = await tarOf([{ name: "/etc/cron.d/evil", data: "x" }]);
    const link = await tarOf([{ name: "l", type: "symlink", linkname: "/etc/passwd" }]);
    const gz = gzipSync(await tarOf([{ name: "a.txt", data: "x".repeat(100_000) }]));
    for (const [bytes, re] of [
      [slip, /tar-slip/],
      [abs, /absolute path/],
      [link, /absolute path/],
      [new TextEncoder().encode("not a tar at all".repeat(64)), /not a tar archive/],
      [gzipSync(Buffer.from("gzip, but no tar inside".repeat(64))), /not a tar archive/],
      [gz.subarray(0, gz.byteLength - 64), /gzip data is corrupt or truncated/],
      [await tarOf([{ name: "h", type: "link", linkname: "a" }]), /hard link/],
    ] as const) {
      await assertGrpcError(
        stack.client.createRun({ prompt: "p", workspaceTar: bytes }),
        grpc.status.INVALID_ARGUMENT,
        new RegExp(`workspace_tar.*${re.source}`),
      );
    }
    assert.equal((await stack.client.listRuns({ pageSize: 500 })).runs.length, before);
    const good = await stack.client.createRun({
      prompt: "p",
      workspaceTar: await tarOf([{ name: "./src/a.txt", data: "hello" }]),
    });
    assert.match(good.run?.workspaceDigest ?? "", /^[0-9a-f]{64}$/);
    await assertStillServing();
  });

  it("after_seq: negative is INVALID_ARGUMENT, beyond the last seq OUT_OF_RANGE", async () => {
    const neg = stack.client.streamEvents({ runId, afterSeq: -1n });
    const negEnd = await neg.end();
    assert.equal(negEnd.status.code, grpc.status.INVALID_ARGUMENT);
    assert.match(negEnd.status.details, /\bafter_seq\b/);
    assert.equal(neg.events.length, 0);

    const past = stack.client.streamEvents({ runId, afterSeq: 2n });
    const pastEnd = await past.end();
    assert.equal(pastEnd.status.code, grpc.status.OUT_OF_RANGE);
    assert.match(pastEnd.status.details, /\bafter_seq\b/);
    assert.equal(past.events.length, 0);

    // At the last seq exactly is allowed: history_only gives nothing and ends.
    const atHead = stack.client.streamEvents({ runId, afterSeq: 1n, historyOnly: true });
    const atHeadEnd = await atHead.end();
    assert.equal(atHeadEnd.status.code, grpc.status.OK, atHeadEnd.status.details);
    assert.equal(atHead.events.length, 0);
    await assertStillServing();
  });

  /** Writes `bytes` on a raw TCP connection; resolves with what came back once the server closed it. */
  function rawExchange(bytes: Buffer, timeoutMs = 5000): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      const sock = net.connect(stack.server.port, "127.0.0.1");
      const timer = setTimeout(() => {
        sock.destroy();
        reject(new Error(`the server kept a garbage connection open for ${timeoutMs} ms`));
      }, timeoutMs);
      sock.on("data", (c: Buffer) => chunks.push(c));
      sock.on("error", () => undefined); // a reset is a fine way to drop garbage
      sock.on("close", () => {
        clearTimeout(timer);
        resolve(Buffer.concat(chunks));
      });
      sock.on("connect", () => sock.write(bytes));
    });
  }

  /** Types of the HTTP/2 frames in `buf`. */
  function frameTypes(buf: Buffer): number[] {
    const types: number[] = [];
    for (let o = 0; o + 9 <= buf.length; o += 9 + buf.readUIntBE(o, 3))
      types.push(buf[o + 3] as number);
    return types;
  }

  it("random bytes on the port: answered 400 and closed, the server serves on", async () => {
    for (let i = 0; i < 3; i++) {
      // Small enough to arrive in one read: the server closes with nothing unread, so the
      // close is a FIN after its answer, never a reset that could swallow the answer.
      const junk = randomBytes(1024);
      junk[0] = 0x16; // not "P": never mistaken for the HTTP/2 preface
      const reply = await rawExchange(junk);
      assert.match(reply.toString("latin1"), /^HTTP\/1\.1 400 /);
    }
    await assertStillServing();
  });

  it("the HTTP/2 preface followed by garbage: the session is dropped, the server serves on", async () => {
    const preface = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
    const random = randomBytes(512);
    random[3] = 0; // a DATA frame where SETTINGS must come: a protocol error, never a wait
    for (const junk of [random, Buffer.alloc(64, 0xff), Buffer.from("GET / HTTP/1.1\r\n")]) {
      const reply = await rawExchange(Buffer.concat([preface, junk]));
      // The server says GOAWAY (frame type 7) and closes; rawExchange fails if it stays open.
      assert.ok(frameTypes(reply).includes(7), `no GOAWAY in ${reply.toString("hex")}`);
    }
    await assertStillServing();
  });

  it("/healthz answers 200", async () => {
    const res = await fetch(`${stack.server.url}/healthz`);
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { status: "ok" });
  });
});

describe("/readyz follows Redis", { timeout: 180_000 }, () => {
  it("is 200 with Redis up and 503 once Redis is gone; /healthz stays 200", async () => {
    const redis = await startRedis();
    let redisStopped = false;
    const server = await startAgentd("server", [
      "--event-log",
      redis.url,
      "--auth-file",
      stack.authFile,
      "--artifact-dir",
      `${stack.dir}/artifacts-readyz`,
    ]);
    const health = new GrpcRunClient(server.addr);
    try {
      const up = await fetch(`${server.url}/readyz`);
      assert.equal(up.status, 200);
      assert.equal(((await up.json()) as { status: string }).status, "ready");
      assert.equal((await health.healthCheck()).status, HealthCheckResponse_ServingStatus.SERVING);

      await redis.stop();
      redisStopped = true;
      let status = 0;
      let body: { status?: string } = {};
      // Generous (120 s): only a server that never notices fails it.
      for (const deadline = Date.now() + 120_000; Date.now() < deadline; ) {
        const res = await fetch(`${server.url}/readyz`);
        status = res.status;
        body = (await res.json()) as typeof body;
        if (status === 503) break;
        await sleep(100);
      }
      assert.equal(status, 503, "waited 120 s for /readyz to answer 503 with Redis gone");
      assert.equal(body.status, "not ready");
      assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
      assert.equal(
        (await health.healthCheck()).status,
        HealthCheckResponse_ServingStatus.NOT_SERVING,
      );
    } finally {
      health.close();
      await server.stop("SIGKILL");
      if (!redisStopped) await redis.stop();
    }
  });
});
