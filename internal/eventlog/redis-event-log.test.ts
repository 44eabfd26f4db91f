import assert from "node:assert/strict";
import { it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Redis } from "ioredis";
import { ulid } from "ulid";
import { OutputDeltaSchema } from "../gen/agentd/v1/events_pb.js";
import { rewindRun } from "../testing/redis-rewind.ts";
import { startRedis, type TestRedis } from "../testing/redis-server.ts";
import { delta, queued, runEventLogConformance } from "./conformance.ts";
import { verifyChain } from "./hash-chain.ts";
import { isLogRewound } from "./log-rewound-error.ts";
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
  async rewind(runId, toSeq) {
    await rewindRun(redis.client(), prefix, runId, toSeq);
    return new RedisEventLog({ client: redis.client(), prefix });
  },
  rewindsLive: true,
  async cleanup() {
    for (const c of extra) c.disconnect();
    await redis.stop();
  },
});

const deltaOf = (runId: string, text: string) => ({
  runId,
  sessionId: "s1",
  payload: { case: "outputDelta" as const, value: create(OutputDeltaSchema, { text }) },
});
const textsOf = (events: { event: { payload: { value?: unknown } } }[]) =>
  events.slice(1).map((e) => (e.event.payload.value as { text: string }).text);

it("appends go on after Redis forgot the script (SCRIPT FLUSH, as after a restart)", async () => {
  const r = await startRedis();
  try {
    const log = new RedisEventLog({ client: r.client(), prefix });
    const runs = Array.from({ length: 6 }, () => ulid());
    for (const runId of runs) await log.append(queued(runId, "t"));
    await r.client().script("FLUSH");
    // Several commits in flight at once (6 runs, 3 rounds each 2 ms apart, 4 per run per
    // round: calls sent as soon as they hold 8 events), each answered NOSCRIPT, then EVAL.
    const pending: Promise<unknown>[] = [];
    for (let round = 0; round < 3; round++) {
      for (const runId of runs)
        for (let i = 0; i < 4; i++) pending.push(log.append(deltaOf(runId, `d${round * 4 + i}`)));
      await new Promise((res) => setTimeout(res, 2));
    }
    await Promise.all(pending);
    for (const runId of runs) {
      const all = await log.read(runId, 0);
      assert.equal(verifyChain(all.map((e) => e.json)).ok, true);
      assert.deepEqual(
        textsOf(all),
        Array.from({ length: 12 }, (_, i) => `d${i}`),
      );
    }
    await log.close();
  } finally {
    await r.stop();
  }
});

it("Redis SIGKILLed and restarted under appends: every acknowledged event once, chains intact", async () => {
  const r = await startRedis(); // appendfsync always: what was acknowledged is on disk
  const client = new Redis(r.url);
  client.on("error", () => undefined);
  try {
    const log = new RedisEventLog({ client, prefix });
    const runs = Array.from({ length: 4 }, () => ulid());
    for (const runId of runs) await log.append(queued(runId, "t"));
    const acked = new Map<string, string[]>(runs.map((id) => [id, []]));
    let stop = false;
    const writers = runs.map(async (runId) => {
      for (let i = 0; !stop; i++) {
        // Appends in flight when Redis dies are re-sent by ioredis after it reconnects
        // (NOSCRIPT on the new server, then EVAL); the ones it gives up on fail.
        await Promise.all(
          [0, 1, 2].map(async (k) => {
            const text = `${i}.${k}`;
            try {
              await log.append(deltaOf(runId, text));
              acked.get(runId)?.push(text);
            } catch {}
          }),
        );
      }
    });
    await new Promise((res) => setTimeout(res, 150));
    await r.restart({ hard: true });
    await new Promise((res) => setTimeout(res, 300));
    stop = true;
    await Promise.all(writers);
    for (const runId of runs) {
      const all = await log.read(runId, 0);
      assert.equal(verifyChain(all.map((e) => e.json)).ok, true, "chain intact");
      const texts = textsOf(all);
      assert.equal(new Set(texts).size, texts.length, "no event stored twice");
      const stored = new Set(texts);
      for (const t of acked.get(runId) ?? []) assert.ok(stored.has(t), `acknowledged ${t} kept`);
      assert.ok((acked.get(runId)?.length ?? 0) > 3, "appends went on after the restart");
    }
    await log.close();
  } finally {
    client.disconnect();
    await r.stop();
  }
});

it("a client with its own keyPrefix: the script's keys get it like every other command's", async () => {
  const r = await startRedis();
  const client = new Redis(r.url, { keyPrefix: "kp:" });
  try {
    const log = new RedisEventLog({ client, prefix: "agentd:" });
    const runId = ulid();
    await log.append(queued(runId, "t"));
    await log.append(deltaOf(runId, "x"));
    assert.equal((await log.read(runId, 0)).length, 2);
    assert.equal((await log.head(runId))?.seq, 2);
    assert.equal(await r.client().exists(`kp:agentd:run:${runId}:events`), 1);
    assert.equal(await r.client().exists(`agentd:run:${runId}:events`), 0);
    await log.close();
  } finally {
    client.disconnect();
    await r.stop();
  }
});

it("a busy run's live events reach a follower in batches; a lone event is not held back", async () => {
  const r = await startRedis();
  try {
    const log = new RedisEventLog({ client: r.client(), prefix, tailLingerMs: 1000 });
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
    assert.ok((arrived.get(2) as number) - sent < 500, "no linger before a lone event");
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
    const most = Math.ceil(span / 1000) + 2;
    assert.ok(batches.length <= most, `30 events in ${span} ms came in ${batches.length} batches`);
    await log.close();
  } finally {
    await r.stop();
  }
});

it("a follow started while Redis is down gets the run's events once it is back", async () => {
  const r = await startRedis();
  const client = r.client();
  try {
    const log = new RedisEventLog({ client, prefix: `down:${ulid()}:` });
    const runId = ulid();
    await log.append(queued(runId, "t"));
    // Not awaited: ioredis would resend SHUTDOWN to a server that is gone until it gives up.
    const admin = r.client();
    admin.call("SHUTDOWN", "NOSAVE").catch(() => undefined);
    for (let i = 0; i < 100 && client.status === "ready"; i++)
      await new Promise((res) => setTimeout(res, 20));
    admin.disconnect();
    const ac = new AbortController();
    const got = (async () => {
      for await (const ev of log.follow(runId, 1, ac.signal)) return ev.event.seq;
      return undefined;
    })();
    await new Promise((res) => setTimeout(res, 500));
    await r.restart();
    await log.append(delta(runId, "after"));
    assert.equal(await got, 2n, "the follow waited for Redis and got the next event");
    ac.abort();
    await log.close();
  } finally {
    await r.stop();
  }
});

it("a failover to a replica that lagged: the writer's next append is refused (EREWOUND), nothing sealed", async () => {
  const primary = await startRedis();
  const replica = await startRedis();
  try {
    const r = replica.client();
    await r.call("REPLICAOF", "127.0.0.1", String(primary.port));
    const onPrimary = new RedisEventLog({ client: primary.client(), prefix });
    const runId = ulid();
    let last = await onPrimary.append(queued(runId, "t"));
    for (let i = 0; i < 2; i++) last = await onPrimary.append(deltaOf(runId, `synced ${i}`));
    // Wait (up to 60 s on a loaded machine) until the replica acknowledged all of it.
    const acked = (await primary.client().call("WAIT", "1", "60000")) as number;
    assert.equal(acked, 1, "the replica is in sync");
    const synced = { seq: last.seq, hash: last.event.hash };
    // The replica stops following (it lags from here on), the primary acknowledges more.
    await r.call("REPLICAOF", "NO", "ONE");
    for (let i = 0; i < 2; i++) last = await onPrimary.append(deltaOf(runId, `lost ${i}`));
    const seen = { seq: last.seq, hash: last.event.hash };
    // The failover: the writer's next append goes to the promoted replica.
    const onReplica = new RedisEventLog({ client: r, prefix });
    const err = await onReplica
      .append({ ...deltaOf(runId, "sealed on the old head"), knownHead: seen })
      .then(
        () => assert.fail("accepted on the lagging replica"),
        (e: unknown) => e,
      );
    assert.ok(isLogRewound(err), String(err));
    assert.deepEqual(err.expected, seen);
    assert.deepEqual(err.stored, synced);
    const stored = await onReplica.read(runId, 0);
    assert.deepEqual(
      textsOf(stored),
      ["synced 0", "synced 1"],
      "nothing was sealed on the replica's older head",
    );
    await onPrimary.close();
    await onReplica.close();
  } finally {
    await replica.stop();
    await primary.stop();
  }
});
