/**
 * The retention sweeper on a real redis-server, through the real Redis event log and the
 * real deletion primitive: what is due goes (every key of it), what is live or not due
 * stays, two sweepers at once delete each run once, runs that ended before the index
 * existed are found, the feed is trimmed, and a Redis outage is survived.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Redis } from "ioredis";
import { ulid } from "ulid";
import { queued } from "../eventlog/conformance.ts";
import { RedisEventLog } from "../eventlog/redis-event-log.ts";
import { logKeys } from "../eventlog/redis-log-keys.ts";
import { RunCompletedSchema, RunStartedSchema } from "../gen/agentd/v1/events_pb.js";
import { runDeletedNotice } from "../lifecycle/notices.ts";
import { RedisRunDeletion } from "../lifecycle/redis-run-deletion.ts";
import { schedulerKeys } from "../scheduler/redis-keys.ts";
import { createLogger } from "../telemetry/logger.ts";
import { startRedis, type TestRedis } from "../testing/redis-server.ts";
import { deleteForRetention } from "./delete-for-retention.ts";
import { RedisEndedRunIndex } from "./redis-ended-index.ts";
import { createRetentionSweeper, type RetentionSweeper } from "./sweeper.ts";

const logger = createLogger({ level: "silent", name: "retention-test" });
const HOUR = 3_600_000;
let redis: TestRedis;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis?.stop();
});

/** A fresh prefix, its log, and a sweeper factory on its own connection. */
function world(retentionOf: (t: string) => number | undefined, serverRetentionMs?: number) {
  const prefix = `t${ulid().toLowerCase()}:`;
  const log = new RedisEventLog({ client: redis.client(), prefix });
  const sweeper = (client: Redis = redis.client(), batch?: number): RetentionSweeper =>
    createRetentionSweeper({
      index: new RedisEndedRunIndex({ client, prefix }),
      deleteRun: deleteForRetention({
        store: new RedisRunDeletion({ client, prefix }),
        artifacts: [],
      }),
      retentionOf,
      serverRetentionMs,
      logger,
      ...(batch === undefined ? {} : { batch }),
    });
  return { prefix, log, keys: logKeys(prefix), sweeper };
}

async function endedRun(log: RedisEventLog, tenant: string): Promise<string> {
  const runId = ulid();
  await log.append(queued(runId, tenant));
  await log.append({
    runId,
    sessionId: "s1",
    payload: { case: "runCompleted", value: create(RunCompletedSchema, { summary: "done" }) },
  });
  return runId;
}

async function liveRun(log: RedisEventLog, tenant: string): Promise<string> {
  const runId = ulid();
  await log.append(queued(runId, tenant));
  await log.append({
    runId,
    sessionId: "s1",
    payload: { case: "runStarted", value: create(RunStartedSchema, {}) },
  });
  return runId;
}

/** Keys of the prefix that name the run. */
async function keysOf(client: Redis, prefix: string, runId: string): Promise<string[]> {
  const found = await client.keys(`${prefix}*${runId}*`);
  return found.filter((k) => !k.endsWith(":deleted")); // the tombstone expires on its own
}

describe("retention sweeper (real Redis)", { timeout: 120_000 }, () => {
  it("deletes ended runs past retention with every key; live and not-due runs stay", async () => {
    const w = world((t) => (t === "keep" ? HOUR : 1));
    const c = redis.client();
    const due = [await endedRun(w.log, "acme"), await endedRun(w.log, "acme")];
    const kept = await endedRun(w.log, "keep");
    const live = await liveRun(w.log, "acme");
    // Ended long ago as far as retention goes, but a worker still holds its lease: fenced.
    const leased = await endedRun(w.log, "acme");
    await c.set(schedulerKeys(w.prefix).lease(leased), "worker-1 7", "PX", HOUR);
    await new Promise((r) => setTimeout(r, 20)); // the 1 ms retention has passed
    const report = await w.sweeper().tick();
    assert.equal(report.errors, 0);
    assert.equal(report.deleted, 2, JSON.stringify(report));
    assert.equal(report.live, 1, "the leased run is refused by the primitive's fence");
    for (const id of due) {
      assert.equal(await w.log.head(id), undefined, `${id} is gone for readers`);
      assert.deepEqual(await keysOf(c, w.prefix, id), [], `no key of ${id} is left`);
      assert.equal(await c.zscore(w.keys.endedRuns("acme"), id), null);
      assert.equal(await c.zscore(w.keys.tenantRuns("acme"), id), null);
    }
    assert.equal((await w.log.head(kept))?.ended, "run.completed", "the 1 h tenant keeps its run");
    assert.equal((await w.log.head(live))?.seq, 2, "a live run is never touched");
    assert.equal(await c.zscore(w.keys.endedRuns("acme"), live), null, "never indexed");
    assert.equal((await w.log.head(leased))?.ended, "run.completed");
    assert.notEqual(await c.zscore(w.keys.endedRuns("acme"), leased), null, "still indexed");
    // The lease goes; the run is due again once its claim passes (here: claim of 5 min, so
    // a second sweep right away leaves it alone — it is not looked at twice in a row).
    await c.del(schedulerKeys(w.prefix).lease(leased));
    assert.equal((await w.sweeper().tick()).deleted, 0);
    assert.equal((await w.log.head(leased))?.ended, "run.completed");
  });

  it("two sweepers at once delete each run exactly once, without errors", async () => {
    const w = world(() => 1);
    const ids: string[] = [];
    for (let i = 0; i < 60; i++) ids.push(await endedRun(w.log, i % 2 ? "a" : "b"));
    await new Promise((r) => setTimeout(r, 20));
    const one = w.sweeper(redis.client(), 7);
    const two = w.sweeper(redis.client(), 7);
    let deleted = 0;
    for (let round = 0; round < 20 && deleted < ids.length; round++) {
      const [r1, r2] = await Promise.all([one.tick(), two.tick()]);
      assert.equal(r1.errors + r2.errors, 0);
      assert.equal(r1.gone + r2.gone, 0, "no sweeper ever got a run the other had");
      deleted += r1.deleted + r2.deleted;
    }
    assert.equal(deleted, ids.length);
    for (const id of ids) assert.equal(await w.log.head(id), undefined);
  });

  it("a tick's budget is shared in turn: a tenant with a backlog does not starve the others", async () => {
    const w = world(() => 1);
    for (const t of ["a", "a", "a", "b", "b", "b"]) await endedRun(w.log, t);
    await new Promise((r) => setTimeout(r, 20));
    const s = w.sweeper(redis.client(), 1);
    for (let i = 0; i < 2; i++) assert.equal((await s.tick()).deleted, 1);
    const c = redis.client();
    assert.equal(await c.zcard(w.keys.endedRuns("a")), 2, "one of a's runs went");
    assert.equal(await c.zcard(w.keys.endedRuns("b")), 2, "and one of b's");
  });

  it("a sweeper killed mid-deletion: its claimed run is claimed again later and finished", async () => {
    const w = world(() => 1);
    const c = redis.client();
    const id = await endedRun(w.log, "acme");
    await new Promise((r) => setTimeout(r, 20));
    // The dead sweeper's part: it claimed the run and wrote the tombstone, then died.
    const index = new RedisEndedRunIndex({ client: c, prefix: w.prefix });
    const now = await index.now();
    assert.deepEqual(await index.claimDue("acme", now - 1, now + 100, 10), [id]);
    const store = new RedisRunDeletion({ client: c, prefix: w.prefix });
    const rec = { by: "retention", reason: "r", at: now };
    const marked = await store.mark(id, undefined, rec, runDeletedNotice);
    assert.equal(marked.kind, "marked");
    assert.equal((await w.sweeper().tick()).deleted, 0, "still claimed by the dead sweeper");
    await new Promise((r) => setTimeout(r, 150)); // the claim runs out
    const r = await w.sweeper().tick();
    assert.equal(r.errors, 0);
    assert.equal(r.gone, 1, "the deletion the dead one began is finished, not begun again");
    assert.deepEqual(await keysOf(c, w.prefix, id), []);
    assert.equal(await c.zscore(w.keys.endedRuns("acme"), id), null);
  });

  it("finds runs that ended before the index existed, once", async () => {
    const w = world(() => 1);
    const c = redis.client();
    const old = [await endedRun(w.log, "acme"), await endedRun(w.log, "globex")];
    const live = await liveRun(w.log, "acme");
    // As a log written before this feature: no index at all.
    await c.del(w.keys.endedRuns("acme"), w.keys.endedRuns("globex"), w.keys.retentionTenants);
    const s = w.sweeper();
    let backfilled = 0;
    let deleted = 0;
    for (let i = 0; i < 50 && deleted < old.length; i++) {
      const r = await s.tick();
      backfilled += r.backfilled;
      deleted += r.deleted;
    }
    assert.equal(backfilled, 2, "the two ended runs, not the live one");
    assert.equal(deleted, 2);
    assert.equal(await c.hget(w.keys.retentionBackfill, "done"), "1");
    assert.equal((await w.log.head(live))?.seq, 2);
    assert.equal((await s.tick()).backfilled, 0, "the scan runs once");
  });

  it("trims the feed to the longest retention in force; off trims nothing", async () => {
    const c = redis.client();
    const off = world(() => undefined);
    await endedRun(off.log, "acme");
    assert.equal((await off.sweeper().tick()).feedTrimmed, 0);
    assert.equal(await c.xlen(off.keys.feed), 2);
    const on = world((t) => (t === "long" ? HOUR : 1), 1);
    await endedRun(on.log, "long");
    // Enough entries for the approximate trim to drop whole nodes (100 per node by default).
    for (let i = 0; i < 150; i++) await endedRun(on.log, "acme");
    await new Promise((r) => setTimeout(r, 20));
    assert.equal((await on.sweeper(c, 1000).tick()).feedTrimmed, 0, "a 1 h tenant holds the feed");
    await c.del(on.keys.endedRuns("long"));
    await c.srem(on.keys.retentionTenants, "long");
    const r = await on.sweeper(c, 1000).tick();
    assert.ok(r.feedTrimmed >= 100, `trimmed ${r.feedTrimmed}`);
    assert.ok((await c.xlen(on.keys.feed)) < 300);
  });

  it("a Redis outage fails the tick (counted), and the next tick after it comes back works", async () => {
    const own = await startRedis();
    // As cmd/agentd configures it: a command that does not answer fails (--redis-timeout-ms).
    const client = new Redis({ ...own.clientOptions, commandTimeout: 1000 });
    client.on("error", () => undefined);
    try {
      const prefix = "outage:";
      const log = new RedisEventLog({ client: own.client(), prefix });
      const ids = [await endedRun(log, "acme"), await endedRun(log, "acme")];
      let errors = 0;
      const s = createRetentionSweeper({
        index: new RedisEndedRunIndex({ client, prefix }),
        deleteRun: deleteForRetention({
          store: new RedisRunDeletion({ client, prefix }),
          artifacts: [],
        }),
        retentionOf: () => 1,
        serverRetentionMs: 1,
        logger,
        onError: () => errors++,
      });
      await own.restart({
        hard: true,
        whileDown: async () => {
          const r = await s.tick();
          assert.ok(r.errors >= 1, "the tick reports the failure instead of throwing");
        },
      });
      assert.ok(errors >= 1);
      let deleted = 0;
      for (let i = 0; i < 30 && deleted < 2; i++) {
        const r = await s.tick();
        deleted += r.deleted;
        if (r.errors > 0) await new Promise((res) => setTimeout(res, 500)); // still reconnecting
      }
      assert.equal(deleted, 2);
      for (const id of ids) assert.equal(await log.head(id), undefined);
    } finally {
      client.disconnect();
      await own.stop();
    }
  });
});
