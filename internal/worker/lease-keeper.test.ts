/**
 * Lease timing against a real redis-server: a stall shorter than the lease TTL never costs
 * a live worker its lease (Redis paused for TTL/2 with CLIENT PAUSE); a longer one makes the
 * keeper let go before another worker can take the run over; a renewal refused because the
 * epoch moved on is noticed at once.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ulid } from "ulid";
import { RedisEventLog } from "../eventlog/redis-event-log.ts";
import type { Claim } from "../scheduler/port.ts";
import { RedisRunQueue } from "../scheduler/redis-run-queue.ts";
import { startRedis, type TestRedis } from "../testing/redis-server.ts";
import { keepLease } from "./lease-keeper.ts";

let srv: TestRedis;
before(async () => {
  srv = await startRedis();
});
after(async () => {
  await srv.stop();
});

async function claimed(
  ttl: number,
): Promise<{ q: RedisRunQueue; claim: Claim; at: number; prefix: string }> {
  const prefix = `lease:${ulid()}:`;
  const q = new RedisRunQueue({ client: srv.client(), prefix, leaseTtlMs: ttl, pollMs: 100 });
  const runId = ulid();
  await q.enqueue({ runId, tenantId: "t", sessionId: ulid(), priority: 5 });
  const claim = await q.claim("w1", { blockMs: 0 });
  const at = Date.now();
  assert.ok(claim !== undefined);
  return { q, claim, at, prefix };
}

const pause = (ms: number) => srv.client().call("CLIENT", "PAUSE", String(ms), "ALL");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("lease timing", () => {
  it("a Redis stall of TTL/2 never costs a live worker its lease", async () => {
    const ttl = 2000;
    const { q, claim, at, prefix } = await claimed(ttl);
    const errors: unknown[] = [];
    const k = keepLease({
      leases: q.leases,
      grant: claim.lease,
      ttlMs: ttl,
      grantedAt: at,
      onRenewError: (e) => errors.push(e),
    });
    try {
      await sleep(500);
      await pause(ttl / 2);
      await sleep(ttl / 2 + 1500);
      assert.equal(k.lost.aborted, false, `lost: ${String(k.lost.reason)}`);
      const other = new RedisRunQueue({
        client: srv.client(),
        prefix,
        leaseTtlMs: ttl,
        pollMs: 100,
      });
      assert.equal(await other.claim("w2", { blockMs: 0 }), undefined, "nobody took it over");
      await other.close();
    } finally {
      k.stop();
      await q.close();
    }
  });

  it("a stall longer than the TTL: the keeper lets go before a takeover is possible", async () => {
    const ttl = 1000;
    const { q, claim, at, prefix } = await claimed(ttl);
    const k = keepLease({
      leases: q.leases,
      grant: claim.lease,
      ttlMs: ttl,
      grantedAt: at,
      onRenewError: () => undefined,
    });
    try {
      await sleep(100);
      const stalled = Date.now();
      void pause(3000);
      await new Promise<void>((r) => k.lost.addEventListener("abort", () => r(), { once: true }));
      const lostAt = Date.now();
      assert.equal(k.lost.reason, "expired");
      assert.ok(lostAt - stalled < ttl + 200, `let go ${lostAt - stalled} ms into the stall`);
      // After the stall, another worker takes the run over; the keeper had let go first.
      const other = new RedisRunQueue({
        client: srv.client(),
        prefix,
        leaseTtlMs: ttl,
        pollMs: 100,
      });
      let taken: Claim | undefined;
      for (let i = 0; i < 60 && taken === undefined; i++) {
        taken = await other.claim("w2", { blockMs: 0 });
        if (taken === undefined) await sleep(100);
      }
      assert.ok(taken !== undefined, "taken over after the stall");
      assert.ok(Date.now() > lostAt);
      assert.ok(
        taken.lease.epoch > claim.lease.epoch,
        "with a new epoch (the old owner is fenced)",
      );
      await other.close();
    } finally {
      k.stop();
      await q.close();
    }
  });

  it("a renewal refused because another worker bumped the epoch is noticed within a renewal", async () => {
    const ttl = 900;
    const { q, claim, at, prefix } = await claimed(ttl);
    const k = keepLease({
      leases: q.leases,
      grant: claim.lease,
      ttlMs: ttl,
      grantedAt: at,
      onRenewError: () => undefined,
    });
    try {
      await new RedisEventLog({ client: srv.client(), prefix }).bumpEpoch(claim.runId);
      const t = Date.now();
      await new Promise<void>((r) => k.lost.addEventListener("abort", () => r(), { once: true }));
      assert.equal(k.lost.reason, "lost");
      assert.ok(Date.now() - t <= ttl / 3 + 300);
    } finally {
      k.stop();
      await q.close();
    }
  });
});
