import assert from "node:assert/strict";
import { it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Redis } from "ioredis";
import { ulid } from "ulid";
import { OutputDeltaSchema } from "../gen/agentd/v1/events_pb.js";
import { startRedis, type TestRedis } from "../testing/redis-server.ts";
import { queued, runEventLogConformance } from "./conformance.ts";
import { verifyChain } from "./hash-chain.ts";
import { RedisEventLog } from "./redis-event-log.ts";

let redis: TestRedis;
const prefix = `test:${ulid()}:`;
const extra: Redis[] = [];

runEventLogConformance("redis", {
  async open() {
    redis = await startRedis();
    return new RedisEventLog({ client: redis.client(), prefix });
  },
  async writers(n) {
    return Array.from({ length: n }, () => {
      const c = new Redis(redis.url);
      c.on("error", () => undefined);
      extra.push(c);
      return new RedisEventLog({ client: c, prefix });
    });
  },
  async restart() {
    // SIGKILL: only what AOF (appendfsync always) persisted survives.
    await redis.restart({ hard: true });
    return new RedisEventLog({ client: redis.client(), prefix });
  },
  async cleanup() {
    for (const c of extra) c.disconnect();
    await redis.stop();
  },
});

it("appends go on after Redis forgot the script (SCRIPT FLUSH, as after a restart)", async () => {
  const r = await startRedis();
  try {
    const log = new RedisEventLog({ client: r.client(), prefix });
    const runId = ulid();
    await log.append(queued(runId, "t"));
    await r.client().script("FLUSH");
    // Several commits in flight at once, each answered NOSCRIPT, then sent as EVAL.
    await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        log.append({
          runId,
          sessionId: "s1",
          payload: { case: "outputDelta", value: create(OutputDeltaSchema, { text: `d${i}` }) },
        }),
      ),
    );
    const all = await log.read(runId, 0);
    assert.equal(all.length, 31);
    assert.equal(verifyChain(all.map((e) => e.json)).ok, true);
    assert.deepEqual(
      all.slice(1).map((e) => (e.event.payload.value as { text: string }).text),
      Array.from({ length: 30 }, (_, i) => `d${i}`),
    );
    await log.close();
  } finally {
    await r.stop();
  }
});

it("a busy run's live events reach a follower in batches; a lone event is not held back", async () => {
  const r = await startRedis();
  try {
    const log = new RedisEventLog({ client: r.client(), prefix, tailLingerMs: 250 });
    const runId = ulid();
    await log.append(queued(runId, "t"));
    const abort = new AbortController();
    const batches: number[][] = [];
    const arrived = new Map<number, number>();
    const following = (async () => {
      for await (const batch of log.followBatches(runId, 1, abort.signal)) {
        batches.push(batch.map((e) => e.seq));
        for (const e of batch) arrived.set(e.seq, performance.now());
        if (batch.some((e) => e.seq === 32)) return;
      }
    })();
    const append = (text: string) =>
      log.append({
        runId,
        sessionId: "s1",
        payload: { case: "outputDelta", value: create(OutputDeltaSchema, { text }) },
      });
    // A lone event after a quiet spell goes out at once (the tail is blocked in XREAD).
    await new Promise((res) => setTimeout(res, 100));
    const sent = performance.now();
    await append("lone");
    while (!arrived.has(2)) await new Promise((res) => setTimeout(res, 1));
    assert.ok((arrived.get(2) as number) - sent < 150, "no linger before a lone event");
    // 30 events, one every ~2 ms: the linger gathers them into a few batches.
    const first = performance.now();
    for (let i = 0; i < 30; i++) {
      await append(`b${i}`);
      await new Promise((res) => setTimeout(res, 2));
    }
    const span = performance.now() - first;
    await following;
    abort.abort();
    assert.deepEqual(
      batches.flat(),
      Array.from({ length: 31 }, (_, i) => i + 2),
    );
    // One batch per linger period at most (plus the lone event's), however slow the machine.
    const most = Math.ceil(span / 250) + 2;
    assert.ok(batches.length <= most, `30 events in ${span} ms came in ${batches.length} batches`);
    await log.close();
  } finally {
    await r.stop();
  }
});
