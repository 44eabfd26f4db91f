/**
 * The tenant day ledger and the runs-per-minute counter, both adapters against one suite
 * (Redis: a private redis-server), and the pure checks at their edges.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ulid } from "ulid";
import { startRedis, type TestRedis } from "../testing/redis-server.ts";
import { daySpent, msToNextUtcDay, type TenantDayLedger, utcDay } from "./day-usage.ts";
import { MemoryDayLedger } from "./memory-day-usage.ts";
import { RedisDayLedger } from "./redis-day-usage.ts";
import { RedisRunRate } from "./redis-run-rate.ts";
import { MemoryRunRate, minuteOf, type RunRateCounter } from "./run-rate.ts";

let redis: TestRedis;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis?.stop();
});

describe("day checks", () => {
  it("UTC days and the time to the next one", () => {
    const t = Date.UTC(2026, 10, 28, 23, 59, 59, 500);
    assert.equal(utcDay(t), "2026-11-28");
    assert.equal(utcDay(t + 500), "2026-11-29");
    assert.equal(msToNextUtcDay(t), 500);
    assert.equal(msToNextUtcDay(Date.UTC(2026, 0, 1)), 86_400_000);
  });

  it("a day is spent at its limit, not before; the message names the auth file's key", () => {
    const limits = { tokensPerDay: 100, costPerDayMicros: 2_000_000 };
    assert.equal(daySpent("acme", limits, { tokens: 99, costMicros: 1_999_999 }), undefined);
    const t = daySpent("acme", limits, { tokens: 100, costMicros: 0 });
    assert.equal(t?.limit, "tokensPerDay");
    assert.equal(t?.code, "ELIMIT_TOKENS");
    assert.match(t?.message ?? "", /tenants\.acme\.limits\.tokensPerDay/);
    const c = daySpent("acme", limits, { tokens: 0, costMicros: 2_000_000 });
    assert.equal(c?.code, "ELIMIT_COST");
    assert.match(c?.message ?? "", /2\.000000 of its 2\.000000 USD .*costPerDayUsd/);
    assert.equal(daySpent("acme", {}, { tokens: 1e12, costMicros: 1e12 }), undefined, "no limit");
  });

  it("minute windows", () => {
    assert.deepEqual(minuteOf(60_000 * 7 + 1500), { minute: 7, retryAfterMs: 58_500 });
  });
});

function ledgerSuite(name: string, make: () => TenantDayLedger) {
  describe(`TenantDayLedger: ${name}`, () => {
    it("adds per tenant and day, publishes limits as a whole set", async () => {
      const l = make();
      const [a, b] = [`a${ulid()}`, `b${ulid()}`];
      await l.add(a, "2026-11-28", { tokens: 10, costMicros: 5 });
      await l.add(a, "2026-11-28", { tokens: 7, costMicros: 1 });
      await l.add(a, "2026-11-29", { tokens: 1, costMicros: 0 });
      assert.deepEqual(await l.useOf(a, "2026-11-28"), { tokens: 17, costMicros: 6 });
      assert.deepEqual(await l.useOf(a, "2026-11-29"), { tokens: 1, costMicros: 0 });
      assert.deepEqual(await l.useOf(b, "2026-11-28"), { tokens: 0, costMicros: 0 });
      await l.setLimits(
        new Map([
          [a, { tokensPerDay: 5 }],
          [b, { costPerDayMicros: 9 }],
        ]),
      );
      assert.deepEqual(await l.limitsOf(a), { tokensPerDay: 5 });
      await l.setLimits(new Map([[b, { costPerDayMicros: 9 }]]));
      assert.deepEqual(await l.limitsOf(a), {}, "a tenant left out has no limit any more");
      assert.deepEqual(await l.limitsOf(b), { costPerDayMicros: 9 });
    });
  });
}

ledgerSuite("memory", () => new MemoryDayLedger());
ledgerSuite("redis", () => new RedisDayLedger({ client: redis.client(), prefix: `t:${ulid()}:` }));

function rateSuite(name: string, make: () => RunRateCounter) {
  describe(`RunRateCounter: ${name}`, () => {
    it("admits the limit in a minute, refuses (without counting) past it, frees the next minute", async () => {
      const r = make();
      const t = `t${ulid()}`;
      const got = [];
      for (let i = 0; i < 5; i++) got.push(await r.take(t, 100, 3));
      assert.deepEqual(got, [true, true, true, false, false]);
      assert.equal(await r.take(`o${ulid()}`, 100, 3), true, "another tenant has its own count");
      assert.equal(await r.take(t, 100, 4), true, "refusals were not counted: 3 + 1 fits 4");
      assert.equal(await r.take(t, 101, 3), true, "a new minute");
    });
  });
}

rateSuite("memory", () => new MemoryRunRate());
rateSuite("redis", () => new RedisRunRate({ client: redis.client(), prefix: `t:${ulid()}:` }));

describe("Redis keys expire", () => {
  it("a day's use and a minute's count never live forever", async () => {
    const prefix = `t:${ulid()}:`;
    const client = redis.client();
    await new RedisDayLedger({ client, prefix }).add("acme", "2026-11-28", {
      tokens: 1,
      costMicros: 1,
    });
    await new RedisRunRate({ client, prefix }).take("acme", 5, 1);
    const dayTtl = await client.ttl(`${prefix}tenant:acme:day:2026-11-28`);
    const minuteTtl = await client.pttl(`${prefix}tenant:acme:minute:5`);
    assert.ok(dayTtl > 0 && dayTtl <= 3 * 86400, `day key ttl ${dayTtl}`);
    assert.ok(minuteTtl > 0 && minuteTtl <= 120_000, `minute key ttl ${minuteTtl}`);
  });
});
