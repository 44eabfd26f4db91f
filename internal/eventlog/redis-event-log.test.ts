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

/**
 * Follows `runId` from its start on `log`: the batches as they come, and a wait for a seq.
 * Seq 1 arrives (from the log) only once the live tail is in place: from then on, an event
 * appended reaches the follower through the tail. `stop` ends the follow and the tail.
 */
function follower(log: RedisEventLog, runId: string) {
  const abort = new AbortController();
  const batches: number[][] = [];
  let wake: (() => void) | undefined;
  const following = (async () => {
    for await (const batch of log.followBatches(runId, 0, abort.signal)) {
      batches.push(batch.map((e) => e.seq));
      wake?.();
    }
  })();
  const has = (seq: number) => batches.some((b) => b.includes(seq));
  return {
    batches,
    has,
    /** Resolves once `seq` has arrived; only a follow that never delivers it hangs here. */
    async arrived(seq: number): Promise<void> {
      while (!has(seq)) await new Promise<void>((r) => (wake = r));
    },
    async stop(): Promise<void> {
      abort.abort();
      wake?.();
      await following;
    },
  };
}

const outputOf = (log: RedisEventLog, runId: string, text: string) =>
  log.append({
    runId,
    sessionId: "s1",
    payload: { case: "outputDelta", value: create(OutputDeltaSchema, { text }) },
  });

it("a lone event after a quiet spell is not held back by the linger", async () => {
  const r = await startRedis();
  try {
    // A linger far past the test's own timeout: the lone event arrives only if the tail,
    // blocked in XREAD, hands it on at once instead of lingering first.
    const log = new RedisEventLog({ client: r.client(), prefix, tailLingerMs: 3_600_000 });
    const runId = ulid();
    await log.append(queued(runId, "t"));
    const f = follower(log, runId);
    await f.arrived(1);
    await outputOf(log, runId, "lone");
    await f.arrived(2);
    assert.deepEqual(f.batches, [[1], [2]]);
    await f.stop(); // the tail stops, and its hour-long linger with it
    await log.close();
  } finally {
    await r.stop();
  }
});

it("a busy run's live events reach a follower in batches: those appended during a linger come in one", async () => {
  const r = await startRedis();
  try {
    // Events appended while the tail lingers after a read must come in one batch. Whether the
    // 30 appends fit in the linger is observed, not assumed: when the machine was too slow
    // (one of them arrived before the last was appended), the round says nothing and is
    // tried again with a linger four times as long.
    for (let lingerMs = 1000; ; lingerMs *= 4) {
      const log = new RedisEventLog({ client: r.client(), prefix, tailLingerMs: lingerMs });
      const runId = ulid();
      await log.append(queued(runId, "t"));
      const f = follower(log, runId);
      await f.arrived(1);
      await outputOf(log, runId, "first");
      await f.arrived(2); // the tail read it and lingers now
      for (let i = 0; i < 30; i++) await outputOf(log, runId, `b${i}`);
      const early = f.batches.length > 2;
      await f.arrived(32);
      await f.stop();
      await log.close();
      if (early && lingerMs < 64_000) continue;
      assert.ok(!early, `the 30 appends outlasted a ${lingerMs} ms linger: ${f.batches.length}`);
      assert.deepEqual(f.batches, [[1], [2], Array.from({ length: 30 }, (_, i) => i + 3)]);
      return;
    }
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
