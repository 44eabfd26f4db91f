/**
 * Integration tests of `agentd server` as its issue says it is checked: the real process
 * (bin/agentd) on a private redis-server, driven by real clients — @grpc/grpc-js, `buf curl`
 * over gRPC, gRPC-Web and Connect, and the system `curl` reading SSE — while the test
 * appends events to the same Redis as a worker would.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { verifyChain } from "../eventlog/hash-chain.ts";
import type { Event } from "../gen/agentd/v1/events_pb.js";
import { RunState } from "../gen/agentd/v1/run_service_pb.js";
import {
  appendEvents,
  curl,
  deltas,
  parseCurlOutput,
  parseSse,
  payload,
  range,
  type Stack,
  sleep,
  startCurl,
  startStack,
  TOKENS,
} from "../testing/api-fixtures.ts";
import { eventsJson, GrpcRunClient, grpc } from "../testing/grpc-run-client.ts";

const BUF = fileURLToPath(new URL("../../node_modules/.bin/buf", import.meta.url));
const execFileP = promisify(execFile);

let stack: Stack;

before(async () => {
  stack = await startStack();
});

after(async () => {
  await stack?.stop();
});

/** A new queued run of acme. */
async function newRun(prompt = "integration test") {
  const { run } = await stack.client.createRun({ prompt });
  assert.ok(run);
  return run;
}

describe("StreamEvents over grpc-js", { timeout: 180_000 }, () => {
  it("delivers seq 1..N once each, in order, hash-chained, and ends at run.completed", async () => {
    const run = await newRun("stream me");
    assert.equal(run.state, RunState.QUEUED);
    const stream = stack.client.streamEvents({ runId: run.runId, afterSeq: 0n });
    // seq 1 arrives before anything else is appended: the stream is open and following.
    await stream.waitForCount(1);
    assert.equal(stream.events[0]?.type, "run.queued");

    // Appended while the stream is open, in bursts, by a "worker" on the same Redis.
    await appendEvents(stack.log, run, [payload.started(), ...deltas(14, "first")]);
    await stream.waitForCount(16);
    for (let burst = 0; burst < 4; burst++) {
      await appendEvents(stack.log, run, deltas(5, `burst ${burst}`));
      await sleep(5);
    }
    const last = await appendEvents(stack.log, run, [payload.completed("all done")]);
    assert.equal(last, 37);

    const end = await stream.end();
    assert.equal(end.status.code, grpc.status.OK, end.error?.details);
    assert.deepEqual(stream.seqs(), range(1, last));
    assert.equal(stream.events.at(-1)?.type, "run.completed");
    const verdict = verifyChain(eventsJson(stream.events));
    assert.deepEqual(verdict.ok, true, JSON.stringify(verdict));

    const { run: done } = await stack.client.getRun(run.runId);
    assert.equal(done?.state, RunState.COMPLETED);
    assert.equal(done?.lastSeq, BigInt(last));
    assert.equal(done?.summary, "all done");
    assert.equal(verdict.ok && verdict.headHash, done?.lastHash);
  });

  it("after_seq resumes after that seq, and history_only ends at the stored head", async () => {
    const run = await newRun();
    await appendEvents(stack.log, run, [payload.started(), ...deltas(4)]);
    const stream = stack.client.streamEvents({
      runId: run.runId,
      afterSeq: 3n,
      historyOnly: true,
    });
    const end = await stream.end();
    assert.equal(end.status.code, grpc.status.OK, end.error?.details);
    assert.deepEqual(stream.seqs(), [4, 5, 6]);
  });
});

describe("buf curl (reflection; gRPC, gRPC-Web and Connect)", { timeout: 180_000 }, () => {
  async function bufCurl(...args: string[]): Promise<string> {
    const { stdout } = await execFileP(BUF, ["curl", ...args], { timeout: 120_000 });
    return stdout;
  }
  const PROTOCOLS = [
    ["--protocol", "grpc", "--http2-prior-knowledge"],
    ["--protocol", "grpcweb"],
    ["--protocol", "connect"],
  ];

  it("lists the methods by reflection", async () => {
    const out = await bufCurl("--list-methods", stack.server.url);
    for (const m of ["CreateRun", "GetRun", "ListRuns", "StreamEvents", "CancelRun"])
      assert.match(out, new RegExp(`^agentd\\.v1\\.RunService/${m}$`, "m"));
    assert.match(out, /^grpc\.health\.v1\.Health\/Check$/m);
  });

  it("GetRun answers over all three protocols", async () => {
    const run = await newRun("over buf curl");
    await appendEvents(stack.log, run, [payload.started()]);
    for (const protocol of PROTOCOLS) {
      const out = await bufCurl(
        ...protocol,
        "-H",
        `Authorization: Bearer ${TOKENS.acme}`,
        "-d",
        JSON.stringify({ runId: run.runId }),
        `${stack.server.url}/agentd.v1.RunService/GetRun`,
      );
      const got = JSON.parse(out) as { run: Record<string, unknown> };
      assert.equal(got.run.runId, run.runId, protocol.join(" "));
      assert.equal(got.run.state, "RUN_STATE_RUNNING", protocol.join(" "));
      assert.equal(got.run.tenantId, "acme", protocol.join(" "));
      assert.equal(got.run.lastSeq, "2", protocol.join(" "));
    }
  });

  it("refuses GetRun without a token over all three protocols", async () => {
    const run = await newRun();
    for (const protocol of PROTOCOLS) {
      await assert.rejects(
        bufCurl(
          ...protocol,
          "-d",
          JSON.stringify({ runId: run.runId }),
          `${stack.server.url}/agentd.v1.RunService/GetRun`,
        ),
        (err: Error & { stderr?: string }) => {
          assert.match(err.stderr ?? "", /unauthenticated/i, protocol.join(" "));
          return true;
        },
      );
    }
  });
});

describe("SSE over curl (HTTP/1.1)", { timeout: 180_000 }, () => {
  const sseArgs = (runId: string, ...headers: string[]): string[] => [
    "-H",
    `Authorization: Bearer ${TOKENS.acme}`,
    ...headers.flatMap((h) => ["-H", h]),
    `${stack.server.url}/v1/runs/${runId}/events`,
  ];

  it("streams a finished run whole: id 1..N, types, and the stored chained JSON", async () => {
    const run = await newRun("sse");
    const last = await appendEvents(stack.log, run, [
      payload.started(),
      ...deltas(5),
      payload.completed(),
    ]);
    const res = await curl(sseArgs(run.runId));
    assert.equal(res.status, 200);
    assert.match(res.headers["content-type"] ?? "", /^text\/event-stream/);
    const events = parseSse(res.body);
    assert.deepEqual(
      events.map((e) => e.id),
      range(1, last).map(String),
    );
    assert.equal(events[0]?.event, "run.queued");
    assert.equal(events.at(-1)?.event, "run.completed");
    for (const e of events) assert.equal(JSON.parse(e.data).type, e.event);
    const verdict = verifyChain(events.map((e) => e.data));
    assert.equal(verdict.ok, true, JSON.stringify(verdict));

    // Resuming a finished run: exactly the events after Last-Event-ID.
    const resumed = parseSse((await curl(sseArgs(run.runId, "Last-Event-ID: 4"))).body);
    assert.deepEqual(
      resumed.map((e) => e.id),
      range(5, last).map(String),
    );
    assert.deepEqual(
      resumed.map((e) => e.data),
      events.slice(4).map((e) => e.data),
    );
  });

  it("resumes a live run with Last-Event-ID: k from k+1 and follows it to the end", async () => {
    const run = await newRun("sse live");
    await appendEvents(stack.log, run, [payload.started(), ...deltas(3)]); // head: 5
    const c = startCurl(sseArgs(run.runId, "Last-Event-ID: 3"));
    try {
      await c.waitFor(/^id: 5$/m);
      await appendEvents(stack.log, run, deltas(3, "live"));
      await c.waitFor(/^id: 8$/m);
      const last = await appendEvents(stack.log, run, [payload.completed()]);
      const { code, stdout } = await c.done;
      assert.equal(code, 0, "curl ends when the run's stream ends");
      const res = parseCurlOutput(stdout);
      assert.equal(res.status, 200);
      const ids = parseSse(res.body).map((e) => Number(e.id));
      assert.deepEqual(ids, range(4, last));
    } finally {
      c.kill();
    }
  });

  it("resuming an idle live run at its head answers 200 at once, before any event", async () => {
    const run = await newRun("sse idle");
    await appendEvents(stack.log, run, [payload.started()]); // head: 2, nothing more yet
    const c = startCurl(sseArgs(run.runId, "Last-Event-ID: 2"));
    try {
      // The headers and the stream's opening comment come without waiting for an event, so
      // proxies and EventSource see a live stream (an approval may keep a run idle for hours).
      await c.waitFor(/\r\n\r\n: agentd event stream\n/, 3000);
      const head = parseCurlOutput(c.output());
      assert.equal(head.status, 200);
      assert.match(head.headers["content-type"] ?? "", /^text\/event-stream/);
      assert.equal(parseSse(head.body).length, 0);
      const last = await appendEvents(stack.log, run, [payload.completed()]);
      const { stdout } = await c.done;
      assert.deepEqual(
        parseSse(parseCurlOutput(stdout).body).map((e) => e.id),
        [String(last)],
      );
    } finally {
      c.kill();
    }
  });

  it("answers 400 naming the field for a non-numeric Last-Event-ID or after_seq", async () => {
    const run = await newRun();
    const res = await curl(sseArgs(run.runId, "Last-Event-ID: abc"));
    assert.equal(res.status, 400);
    assert.match(res.headers["content-type"] ?? "", /^application\/json/);
    const body = JSON.parse(res.body) as { code: string; message: string; field: string };
    assert.equal(body.field, "Last-Event-ID");
    assert.match(body.message, /Last-Event-ID/);
    assert.equal(body.code, "invalid_argument");

    const q = await curl([
      "-H",
      `Authorization: Bearer ${TOKENS.acme}`,
      `${stack.server.url}/v1/runs/${run.runId}/events?after_seq=x1`,
    ]);
    assert.equal(q.status, 400);
    assert.equal((JSON.parse(q.body) as { field: string }).field, "after_seq");
  });
});

describe("a server killed mid-stream", { timeout: 180_000 }, () => {
  it("SIGKILL, restart on the same Redis, resume from the last seq seen: 1..N exactly once", async () => {
    let first = await stack.startServer();
    const run = await newRun("survive a crash");
    let appended = 1;
    let finishing = false;
    let appendError: unknown;
    // The "worker" appends every few ms, before, during and after the outage.
    const worker = (async () => {
      try {
        while (!finishing) {
          appended = await appendEvents(stack.log, run, [payload.delta(`tick ${appended}`)]);
          await sleep(10);
        }
        appended = await appendEvents(stack.log, run, [payload.completed()]);
      } catch (err) {
        appendError = err;
      }
    })();

    const c1 = new GrpcRunClient(first.addr, TOKENS.acme);
    const c2Holder: { c?: GrpcRunClient } = {};
    try {
      const s1 = c1.streamEvents({ runId: run.runId, afterSeq: 0n });
      await s1.waitForCount(10);
      const exit = await first.kill();
      assert.equal(exit.signal, "SIGKILL");
      const end1 = await s1.end();
      assert.notEqual(end1.status.code, grpc.status.OK, "the first stream broke with the server");
      const seen = s1.seqs();
      const lastSeen = seen.at(-1) ?? 0;
      const atKill = appended;

      first = await stack.startServer();
      assert.ok(appended > atKill, "events were appended while no server ran");
      const c2 = new GrpcRunClient(first.addr, TOKENS.acme);
      c2Holder.c = c2;
      const s2 = c2.streamEvents({ runId: run.runId, afterSeq: BigInt(lastSeen) });
      await s2.waitForCount(appended - lastSeen + 5);
      finishing = true;
      await worker;
      assert.equal(appendError, undefined);
      const end2 = await s2.end();
      assert.equal(end2.status.code, grpc.status.OK, end2.error?.details);

      const union: Event[] = [...s1.events, ...s2.events];
      assert.deepEqual(
        union.map((e) => Number(e.seq)),
        range(1, appended),
      );
      assert.equal(union.at(-1)?.type, "run.completed");
      const verdict = verifyChain(eventsJson(union));
      assert.equal(verdict.ok, true, JSON.stringify(verdict));
    } finally {
      finishing = true;
      await worker;
      c1.close();
      c2Holder.c?.close();
      await first.stop("SIGKILL");
    }
  });
});
