/**
 * A Sentinel failover under load with real processes: a primary, two replicas and three
 * redis-sentinel processes; CreateRun admissions and appends run continuously through the
 * connection factory (redis+sentinel://, an ACL user) with --redis-min-replicas-acked 1;
 * the primary is SIGKILLed mid-load. Sentinel promotes a replica, the writers go on
 * against it, and every admission and append acknowledged before, during or after is in
 * the new primary, byte for byte. And the rule itself: a write no replica confirms is not
 * acknowledged.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ulid } from "ulid";
import { isAgentdError } from "../errors.ts";
import { delta, queued } from "../eventlog/conformance.ts";
import { RedisEventLog } from "../eventlog/redis-event-log.ts";
import { RedisRunAdmission } from "../scheduler/redis-run-admission.ts";
import { startSentinels, type TestSentinels } from "../testing/redis-sentinel.ts";
import { startRedis, type TestRedis } from "../testing/redis-server.ts";
import { until } from "../testing/until.ts";
import { connectRedis, createRedisClient } from "./connect.ts";
import { parseRedisUrl } from "./redis-url.ts";

const USER = { name: "agentd", password: "failover-Hunter2-pw" };
const WAIT = { minReplicas: 1, timeoutMs: 2000 };

async function open(url: string) {
  const target = parseRedisUrl(url, { password: USER.password });
  const client = createRedisClient(target, { enableAutoPipelining: true, commandTimeout: 5000 });
  client.on("error", () => undefined);
  await connectRedis(client, target);
  const log = new RedisEventLog({ client, prefix: "fo:", replicaWait: WAIT });
  const admission = new RedisRunAdmission({ client, prefix: "fo:", replicaWait: WAIT });
  return { client, log, admission };
}

describe("Redis Sentinel failover under load", { timeout: 600_000 }, () => {
  let primary: TestRedis;
  const replicas: TestRedis[] = [];
  let sentinels: TestSentinels;
  before(async () => {
    primary = await startRedis({ user: USER });
    for (let i = 0; i < 2; i++)
      replicas.push(await startRedis({ user: USER, replicaOf: primary.port }));
    sentinels = await startSentinels({ primaryPort: primary.port, user: USER });
    await sentinels.waitForReplicas(2);
  });
  after(async () => {
    await sentinels?.stop();
    for (const r of replicas) await r.stop();
    await primary?.stop();
  });

  it("the primary dies mid-load: a replica is promoted, writes go on, nothing acknowledged is lost", async () => {
    const { client, log, admission } = await open(sentinels.url);
    const acked = new Map<string, string[]>(); // run → the JSON of each acknowledged event, by seq
    let killedAt = 0;
    let ackedAfterKill = 0;
    let failures = 0;
    let stop = false;
    const note = (runId: string, seq: number, json: string): void => {
      const list = acked.get(runId) ?? [];
      list[seq - 1] = json;
      acked.set(runId, list);
      if (killedAt > 0) ackedAfterKill++;
    };
    const writer = async (w: number): Promise<void> => {
      while (!stop) {
        const runId = ulid();
        try {
          const ev = await admission.admit({
            first: { ...queued(runId, `t${w}`), tenantId: `t${w}` },
            priority: 5,
          });
          note(runId, ev.seq, ev.json);
        } catch (err) {
          assert.ok(isAgentdError(err), String(err)); // a typed error, never a crash
          failures++;
          continue;
        }
        for (let i = 0; i < 5 && !stop; i++) {
          try {
            const ev = await log.append(delta(runId, `w${w} e${i}`));
            note(runId, ev.seq, ev.json);
          } catch (err) {
            assert.ok(isAgentdError(err), String(err));
            failures++;
          }
        }
      }
    };
    const writers = [0, 1, 2, 3].map(writer);
    // Let the load run, then kill the primary under it.
    while (acked.size < 20) await new Promise((r) => setTimeout(r, 50));
    const oldPort = primary.port;
    killedAt = Date.now();
    await primary.kill();
    // Bounded waits that say what they wait for: the promotion, then writes acknowledged
    // by the new primary and its remaining replica.
    await until(
      "Sentinel promotes a replica",
      async () => (await sentinels.primaryPort().catch(() => oldPort)) !== oldPort,
      { capMs: 180_000 },
    );
    await until("50 writes acknowledged after the failover", () => ackedAfterKill >= 50, {
      capMs: 180_000,
      detail: () => `${ackedAfterKill} so far`,
    });
    stop = true;
    await Promise.all(writers);
    const newPort = await sentinels.primaryPort();
    assert.ok(
      replicas.some((r) => r.port === newPort),
      "a replica is the primary now",
    );

    // Every acknowledged event is in the new primary, as acknowledged; each run's chain is
    // whole (a write that failed may or may not be there: it was never acknowledged).
    const check = await open(sentinels.url);
    let events = 0;
    for (const [runId, jsons] of acked) {
      const stored = await check.log.read(runId, 0);
      jsons.forEach((json, i) => {
        if (json === undefined) return;
        assert.equal(stored[i]?.json, json, `run ${runId} seq ${i + 1} as acknowledged`);
        events++;
      });
    }
    assert.ok(events > 100, `the load acknowledged ${events} events`);
    await log.close();
    await check.log.close();
    client.disconnect();
    check.client.disconnect();
    // Failures are allowed (writes during the failover); the report says how many.
    console.log(`acknowledged ${events} events of ${acked.size} runs; ${failures} writes failed`);
  });

  it("with no replica to confirm it, a write is not acknowledged: EUNAVAILABLE names the setting", async () => {
    const lone = await startRedis({ user: USER });
    try {
      const target = parseRedisUrl(lone.url, { password: USER.password });
      const client = createRedisClient(target);
      await connectRedis(client, target);
      const wait = { minReplicas: 1, timeoutMs: 100 };
      const log = new RedisEventLog({ client, prefix: "lone:", replicaWait: wait });
      const admission = new RedisRunAdmission({ client, prefix: "lone:", replicaWait: wait });
      const runId = ulid();
      await assert.rejects(
        admission.admit({ first: { ...queued(runId, "t"), tenantId: "t" }, priority: 5 }),
        (err: unknown) =>
          isAgentdError(err, "EUNAVAILABLE") &&
          /reached 0 of 1 Redis replicas within 100 ms \(--redis-min-replicas-acked/.test(
            err.message,
          ),
      );
      await assert.rejects(log.append({ ...delta(ulid(), "x"), tenantId: "t" }), (err: unknown) =>
        isAgentdError(err, "EUNAVAILABLE"),
      );
      await log.close();
      client.disconnect();
    } finally {
      await lone.stop();
    }
  });
});
