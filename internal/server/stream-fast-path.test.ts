/**
 * StreamEvents' gRPC fast path (internal/api/stream-events.ts): over gRPC on HTTP/2, live
 * events after the first are written to the HTTP/2 stream as cached, pre-framed messages.
 * Checked with @grpc/grpc-js (none of the server's Connect code) against the real
 * `agentd server` process on a private Redis: order and exactly-once under bursts (batched
 * writes), compressed large events, resume, auth and NOT_FOUND, cancellation without a
 * leaked tail, and a server shut down mid-stream.
 */
import assert from "node:assert/strict";
import http2 from "node:http2";
import { after, before, describe, it } from "node:test";
import { create, toBinary } from "@bufbuild/protobuf";
import type { Redis } from "ioredis";
import { type EventPayload, grpcEnvelope } from "../eventlog/event-codec.ts";
import { verifyChain } from "../eventlog/hash-chain.ts";
import { type Run, RunService } from "../gen/agentd/v1/run_service_pb.js";
import {
  appendEvents,
  payload,
  range,
  type Stack,
  sleep,
  startStack,
  TOKENS,
} from "../testing/api-fixtures.ts";
import { type EventStream, eventsJson, GrpcRunClient, grpc } from "../testing/grpc-run-client.ts";

let stack: Stack;
let admin: Redis;

before(async () => {
  stack = await startStack();
  admin = stack.redis.client();
});

after(async () => {
  await stack?.stop();
});

async function newRun(prompt = "fast path"): Promise<Run> {
  const { run } = await stack.client.createRun({ prompt });
  assert.ok(run);
  return run;
}

/** Appends `payloads` in bursts of `burst` concurrent appends (they commit as groups). */
async function appendBursts(run: Run, payloads: EventPayload[], burst: number): Promise<void> {
  for (let i = 0; i < payloads.length; i += burst) {
    await Promise.all(
      payloads
        .slice(i, i + burst)
        .map((p) => stack.log.append({ runId: run.runId, sessionId: run.sessionId, payload: p })),
    );
  }
}

function assertSeqs(s: EventStream, from: number, to: number): void {
  assert.deepEqual(s.seqs(), range(from, to));
}

/** Redis connections blocked in XREAD: the server's live tails (one per followed run). */
async function blockedTails(): Promise<number> {
  const list = (await admin.client("LIST")) as string;
  return list.split("\n").filter((l) => / cmd=xread /.test(l)).length;
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

describe("StreamEvents gRPC fast path", { timeout: 60_000 }, () => {
  it("every event exactly once and in order to several subscribers, through bursts", async () => {
    const run = await newRun();
    const streams = Array.from({ length: 4 }, () =>
      stack.client.streamEvents({ runId: run.runId, afterSeq: 0n }),
    );
    for (const s of streams) await s.waitForCount(1);
    // Small events in bursts (several per batch), large ones (compressed: grpc-js accepts
    // gzip) among them, then the terminal event.
    const big = "large ✓ ".repeat(2000);
    const payloads: EventPayload[] = [];
    for (let i = 0; i < 400; i++) {
      payloads.push(payload.delta(i % 50 === 7 ? `${big}${i}` : `delta ${i}`));
    }
    await appendBursts(run, payloads, 25);
    const last = await appendEvents(stack.log, run, [payload.completed()]);
    assert.equal(last, 402);
    for (const s of streams) {
      const end = await s.end();
      assert.equal(end.status.code, grpc.status.OK, end.error?.details);
      assertSeqs(s, 1, 402);
      assert.equal(s.events.at(-1)?.type, "run.completed");
      const verdict = verifyChain(eventsJson(s.events));
      assert.equal(verdict.ok, true, JSON.stringify(verdict));
      const e = s.events[8]?.payload;
      assert.equal(e?.case === "outputDelta" ? e.value.text : "", `${big}7`);
    }
  });

  it("resumes after after_seq: history then live, each later event exactly once", async () => {
    const run = await newRun();
    await appendBursts(
      run,
      Array.from({ length: 40 }, (_, i) => payload.delta(`h${i}`)),
      10,
    );
    const s = stack.client.streamEvents({ runId: run.runId, afterSeq: 17n });
    await s.waitForCount(41 - 17);
    await appendBursts(
      run,
      Array.from({ length: 60 }, (_, i) => payload.delta(`l${i}`)),
      7,
    );
    await appendEvents(stack.log, run, [payload.completed()]);
    const end = await s.end();
    assert.equal(end.status.code, grpc.status.OK, end.error?.details);
    assertSeqs(s, 18, 102);
  });

  it("no token or a wrong one is UNAUTHENTICATED; an unknown run NOT_FOUND", async () => {
    const run = await newRun();
    for (const auth of [null, "not-a-token"]) {
      const s = stack.client.streamEvents({ runId: run.runId }, auth);
      const end = await s.end();
      assert.equal(end.status.code, grpc.status.UNAUTHENTICATED);
      assert.equal(s.events.length, 0);
    }
    const missing = stack.client.streamEvents({ runId: "01J00000000000000000000000" });
    const end = await missing.end();
    assert.equal(end.status.code, grpc.status.NOT_FOUND);
    assert.match(end.status.details, /not found/);
    // A tenant that does not own the run gets the same answer.
    const globex = new GrpcRunClient(stack.server.addr, TOKENS.globex);
    try {
      const other = globex.streamEvents({ runId: run.runId });
      assert.equal((await other.end()).status.code, grpc.status.NOT_FOUND);
    } finally {
      globex.close();
    }
  });

  it("a client cancelling mid-stream leaves no tail behind; the run still streams", async () => {
    const run = await newRun();
    const base = await blockedTails();
    const streams = Array.from({ length: 5 }, () =>
      stack.client.streamEvents({ runId: run.runId, afterSeq: 0n }),
    );
    for (const s of streams) await s.waitForCount(1);
    await waitFor("the run's tail", async () => (await blockedTails()) === base + 1);
    // Appends keep coming while the clients cancel.
    let stop = false;
    const appender = (async () => {
      let i = 0;
      while (!stop) {
        await appendBursts(run, [payload.delta(`c${i++}`), payload.delta(`c${i++}`)], 2);
        await sleep(2);
      }
    })();
    for (const s of streams) await s.waitForCount(20);
    for (const s of streams) s.cancel();
    for (const s of streams) {
      const end = await s.end();
      assert.equal(end.status.code, grpc.status.CANCELLED);
      const seqs = s.seqs();
      assert.deepEqual(seqs, range(1, seqs.length), "a gap-free prefix");
    }
    await waitFor("the tail to stop", async () => (await blockedTails()) === base);
    stop = true;
    await appender;

    const again = stack.client.streamEvents({ runId: run.runId, afterSeq: 0n });
    await again.waitForCount(1);
    const last = await appendEvents(stack.log, run, [payload.delta("after"), payload.completed()]);
    const end = await again.end();
    assert.equal(end.status.code, grpc.status.OK, end.error?.details);
    assertSeqs(again, 1, last);
    await waitFor("the tail to stop", async () => (await blockedTails()) === base);
  });

  it("a server shut down mid-stream ends the stream and exits cleanly", async () => {
    const server = await stack.startServer();
    const client = new GrpcRunClient(server.addr, TOKENS.acme);
    const run = await newRun();
    let stop = false;
    const appender = (async () => {
      let i = 0;
      while (!stop) {
        await appendBursts(run, [payload.delta(`s${i++}`), payload.delta(`s${i++}`)], 2);
        await sleep(2);
      }
    })();
    try {
      const s = client.streamEvents({ runId: run.runId, afterSeq: 0n });
      await s.waitForCount(30);
      const exit = await server.stop("SIGTERM", 15_000);
      assert.equal(exit.code, 0, server.output());
      const end = await s.end();
      assert.notEqual(end.status.code, grpc.status.OK);
      const seqs = s.seqs();
      assert.deepEqual(seqs, range(1, seqs.length), "a gap-free prefix");
      assert.doesNotMatch(server.output(), /"level":(50|60)/, "no error logged");
    } finally {
      stop = true;
      await appender;
      client.close();
    }
  });
});

describe("StreamEvents deadlines", { timeout: 180_000 }, () => {
  /** A raw gRPC call (no client-side deadline timer): what the server itself answers. */
  function rawStream(runId: string, timeout: string) {
    const m = RunService.method.streamEvents;
    const frame = grpcEnvelope(0, toBinary(m.input, create(m.input, { runId, afterSeq: 0n })));
    const session = http2.connect(stack.server.url);
    const req = session.request({
      ":method": "POST",
      ":path": `/${m.parent.typeName}/${m.name}`,
      "content-type": "application/grpc+proto",
      te: "trailers",
      "grpc-timeout": timeout,
      authorization: `Bearer ${TOKENS.acme}`,
    });
    req.on("data", () => undefined);
    const trailers = new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
      req.on("trailers", resolve);
      req.on("error", reject);
    });
    req.end(frame);
    return { trailers, close: () => session.close() };
  }

  it("a deadline that expires on a live stream ends it with DEADLINE_EXCEEDED, not OK", async () => {
    const run = await newRun("deadline");
    const t0 = Date.now();
    const call = rawStream(run.runId, "400m");
    const trailers = await call.trailers;
    call.close();
    assert.equal(trailers["grpc-status"], String(grpc.status.DEADLINE_EXCEEDED));
    assert.ok(Date.now() - t0 >= 350, "ended by the deadline, not at once");
  });

  it("a stream that ends with the run before its deadline ends OK", async () => {
    const run = await newRun("deadline-ok");
    const call = rawStream(run.runId, "20S");
    await sleep(200);
    await appendEvents(stack.log, run, [payload.completed()]);
    const trailers = await call.trailers;
    call.close();
    assert.equal(trailers["grpc-status"], "0");
  });
});

it("Connect streaming over HTTP/1.1: a deadline ends the stream with deadline_exceeded", async () => {
  const { run } = await stack.client.createRun({ prompt: "connect deadline" });
  assert.ok(run);
  const m = RunService.method.streamEvents;
  const envelope = grpcEnvelope(
    0,
    toBinary(m.input, create(m.input, { runId: run.runId, afterSeq: 0n })),
  );
  const res = await fetch(`${stack.server.url}/${m.parent.typeName}/${m.name}`, {
    method: "POST",
    headers: {
      "content-type": "application/connect+proto",
      "connect-timeout-ms": "400",
      authorization: `Bearer ${TOKENS.acme}`,
    },
    body: envelope,
  });
  assert.equal(res.status, 200);
  const bytes = Buffer.from(await res.arrayBuffer());
  // Enveloped messages; the last one (flag 0x02) is the end-of-stream JSON.
  let at = 0;
  let end: { error?: { code?: string } } | undefined;
  while (at + 5 <= bytes.length) {
    const n = bytes.readUInt32BE(at + 1);
    if ((bytes[at] as number) & 0x02)
      end = JSON.parse(bytes.subarray(at + 5, at + 5 + n).toString("utf8"));
    at += 5 + n;
  }
  assert.equal(end?.error?.code, "deadline_exceeded");
});
