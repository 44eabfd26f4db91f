import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { ulid } from "ulid";
import { RedisEventLog } from "../eventlog/redis-event-log.ts";
import { startRedis, type TestRedis } from "../testing/redis-server.ts";
import { runRunQueueConformance } from "./conformance.ts";
import type { SchedulerOptions } from "./options.ts";
import type { Claim } from "./port.ts";
import { schedulerKeys } from "./redis-keys.ts";
import { RedisRunQueue } from "./redis-run-queue.ts";

let redis: TestRedis | undefined;
const extra: Redis[] = [];
let current: { prefix: string; opts: SchedulerOptions } | undefined;

function connect(url: string): Redis {
  const c = new Redis(url);
  c.on("error", () => undefined); // restarts are deliberate; commands retry by themselves
  extra.push(c);
  return c;
}

runRunQueueConformance("redis", {
  async open(opts) {
    redis ??= await startRedis();
    // A fresh prefix per test: an empty queue on the same server.
    current = { prefix: `test:${ulid()}:`, opts };
    const client = redis.client();
    return {
      queue: new RedisRunQueue({ ...opts, client, prefix: current.prefix }),
      log: new RedisEventLog({ client, prefix: current.prefix }),
    };
  },
  async more(n) {
    const r = redis as TestRedis;
    const c = current as { prefix: string; opts: SchedulerOptions };
    return Array.from(
      { length: n },
      () => new RedisRunQueue({ ...c.opts, client: connect(r.url), prefix: c.prefix }),
    );
  },
  async cleanup() {
    for (const c of extra) c.disconnect();
    await redis?.stop();
  },
});

describe("RedisRunQueue: durability", () => {
  let srv: TestRedis;
  before(async () => {
    srv = await startRedis();
  });
  after(async () => {
    await srv.stop();
  });

  it("the queue, its claims and epochs survive a Redis crash (AOF, SIGKILL)", async () => {
    const prefix = "agentd:";
    const opts = { leaseTtlMs: 5000, agingMs: 60_000, tenantLimit: 2 };
    const q = new RedisRunQueue({ ...opts, client: srv.client(), prefix });
    const t = `t${ulid()}`;
    const [a1, a2, b1, c1, d1] = [ulid(), ulid(), ulid(), ulid(), ulid()];
    await q.enqueue({ runId: a1, tenantId: t, sessionId: "A", priority: 5 });
    await q.enqueue({ runId: a2, tenantId: t, sessionId: "A", priority: 5 });
    await q.enqueue({ runId: b1, tenantId: t, sessionId: "B", priority: 1 });
    await q.enqueue({ runId: c1, tenantId: t, sessionId: "C", priority: 9 });
    await q.enqueue({ runId: d1, tenantId: `u${ulid()}`, sessionId: "D", priority: 3 });
    const cb = await q.claim("w1", { blockMs: 0 });
    assert.equal(cb?.runId, b1);
    await q.close();

    await srv.restart({ hard: true });

    const q2 = new RedisRunQueue({ ...opts, client: srv.client(), prefix });
    assert.equal(await q2.stateOf(b1), "claimed");
    // The epoch survived (renew checks it) and lives in the event log's meta hash.
    await q2.leases.renew((cb as Claim).lease);
    const epoch = await srv.client().hget(schedulerKeys(prefix).meta(b1), "epoch");
    assert.equal(Number(epoch), cb?.lease.epoch);
    assert.deepEqual(await q2.positionOf(a2), {
      state: "waiting",
      session: 2,
      overall: 3,
      gate: "session",
    });
    assert.equal(await q2.stateOf(c1), "waiting", "over the tenant limit of 2 (b1, a1)");
    const got = [await q2.claim("w2", { blockMs: 0 }), await q2.claim("w2", { blockMs: 0 })];
    assert.deepEqual(
      got.map((c) => c?.runId),
      [d1, a1],
    );
    assert.equal(await q2.claim("w2", { blockMs: 0 }), undefined);
    await q2.release(got[1] as Claim, { outcome: "terminal" });
    assert.equal((await q2.claim("w2", { blockMs: 0 }))?.runId, a2);
    await q2.close();
  });

  it("the lease key, not the entry's idle time, decides: a live lease is never taken over", async () => {
    // A claimer configured with a shorter ttl than the owner (a misconfiguration) finds the
    // owner's entry idle long enough, but the owner's lease key is alive: it hands it back.
    const prefix = `lk:${ulid()}:`;
    const owner = new RedisRunQueue({ client: srv.client(), prefix, leaseTtlMs: 3000 });
    const eager = new RedisRunQueue({ client: srv.client(), prefix, leaseTtlMs: 100 });
    const r = ulid();
    await owner.enqueue({ runId: r, tenantId: "t", sessionId: "s", priority: 5 });
    const c = await owner.claim("w1", { blockMs: 0 });
    await new Promise((res) => setTimeout(res, 250));
    assert.equal(await eager.claim("w2", { blockMs: 0 }), undefined);
    await owner.leases.renew((c as Claim).lease);
    await owner.release(c as Claim, { outcome: "terminal" });
    await owner.close();
    await eager.close();
  });

  it("a blocked claim keeps waiting through a restart and gets the next run", async () => {
    const prefix = `r2:${ulid()}:`;
    const q = new RedisRunQueue({ client: srv.client(), prefix, pollMs: 200 });
    const waiting = q.claim("w1", { blockMs: 8000 });
    await new Promise((r) => setTimeout(r, 100));
    await srv.restart({ hard: true });
    const r = ulid();
    const other = new RedisRunQueue({ client: srv.client(), prefix });
    await other.enqueue({ runId: r, tenantId: "t", sessionId: "s", priority: 5 });
    assert.equal((await waiting)?.runId, r);
    await q.close();
    await other.close();
  });
  it("indexPausedRuns adds the paused records a store from before the index holds", async () => {
    const prefix = `ix:${ulid()}:`;
    const q = new RedisRunQueue({ client: srv.client(), prefix, leaseTtlMs: 5000 });
    const [p1, p2, r1] = [ulid(), ulid(), ulid()];
    for (const r of [p1, p2, r1])
      await q.enqueue({ runId: r, tenantId: "t", sessionId: r, priority: 5 });
    for (let i = 0; i < 2; i++) {
      const c = await q.claim("w1", { blockMs: 0 });
      assert.ok(c);
      await q.release(c, { outcome: "paused" });
      assert.ok([p1, p2, r1].includes(c.runId));
    }
    const paused = await q.pausedRuns(10);
    assert.equal(paused.length, 2);
    // A store written before the index: the set is missing.
    await srv.client().del(schedulerKeys(prefix).paused);
    assert.deepEqual(await q.pausedRuns(10), []);
    assert.equal(await q.indexPausedRuns(), 2);
    assert.deepEqual([...(await q.pausedRuns(10))].sort(), [...paused].sort());
    assert.equal(await q.indexPausedRuns(), 0, "nothing twice");
    await q.close();
  });
});
