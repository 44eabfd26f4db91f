/**
 * Lease timing against a real redis-server: a stall shorter than the lease TTL never costs
 * a live worker its lease (Redis paused for TTL/2 with CLIENT PAUSE); a longer one makes the
 * keeper let go before another worker can take the run over (proved by the order of the two,
 * not by a stopwatch); a renewal refused because the epoch moved on is noticed by that very
 * renewal.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ulid } from "ulid";
import { RedisEventLog } from "../eventlog/redis-event-log.ts";
import type { Claim, Lease } from "../scheduler/port.ts";
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

/** Polls `probe` until it gives a value, for up to 120 s (generous: a loaded machine passes). */
async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined) {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`waited 120 s for ${what}`);
    await sleep(50);
  }
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
    // What happened, in order: the keeper letting go, another worker taking the run.
    const order: string[] = [];
    k.lost.addEventListener("abort", () => order.push(`let go (${String(k.lost.reason)})`), {
      once: true,
    });
    const other = new RedisRunQueue({ client: srv.client(), prefix, leaseTtlMs: ttl, pollMs: 100 });
    try {
      await sleep(100);
      void pause(5 * ttl);
      // Another worker tries all through the stall; Redis answers it only once the stall ends.
      const taken = await until("another worker taking the run over", async () => {
        const c = await other.claim("w2", { blockMs: 0 });
        if (c !== undefined) order.push("taken over");
        return c;
      });
      assert.deepEqual(order, ["let go (expired)", "taken over"], "the keeper let go first");
      assert.ok(
        taken.lease.epoch > claim.lease.epoch,
        "with a new epoch (the old owner is fenced)",
      );
    } finally {
      k.stop();
      await other.close();
      await q.close();
    }
  });

  it("a renewal refused because another worker bumped the epoch is noticed by that renewal", async () => {
    const ttl = 900;
    const { q, claim, at, prefix } = await claimed(ttl);
    const renewals: string[] = [];
    const leases: Lease = {
      acquire: (runId, workerId, ttlMs) => q.leases.acquire(runId, workerId, ttlMs),
      release: (lease) => q.leases.release(lease),
      async renew(lease) {
        try {
          await q.leases.renew(lease);
          renewals.push("renewed");
        } catch (err) {
          renewals.push("refused");
          throw err;
        }
      },
    };
    let seenAtLoss: string[] = [];
    const k = keepLease({
      leases,
      grant: claim.lease,
      ttlMs: ttl,
      grantedAt: at,
      // A clock that stands still: the lease never counts as expired, so only a refused
      // renewal can end it.
      now: () => at,
      onRenewError: () => undefined,
    });
    k.lost.addEventListener("abort", () => (seenAtLoss = [...renewals]), { once: true });
    try {
      await until("a first renewal", () => renewals.includes("renewed") || undefined);
      await new RedisEventLog({ client: srv.client(), prefix }).bumpEpoch(claim.runId);
      await until("the keeper noticing the lost lease", () => k.lost.aborted || undefined);
      assert.equal(k.lost.reason, "lost");
      // The first refusal is the one that let go: every renewal before it succeeded.
      assert.equal(seenAtLoss.at(-1), "refused");
      assert.equal(seenAtLoss.filter((r) => r === "refused").length, 1);
    } finally {
      k.stop();
      await q.close();
    }
  });
});
