/**
 * The RunQueue/Lease conformance suite. Both adapters (and any stand-in) must pass it; each
 * adapter's test file calls runRunQueueConformance with a harness. Tests isolate themselves
 * with fresh stores (open) and fresh run, tenant and session ids; timings are kept short
 * (lease ttl 300 ms, aging 30 ms) so the suite stays within seconds.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { ulid } from "ulid";
import { isAgentdError } from "../errors.ts";
import { delta, queued } from "../eventlog/conformance.ts";
import type { EventPayload } from "../eventlog/event-codec.ts";
import type { EventLog } from "../eventlog/port.ts";
import { RunCancelledSchema } from "../gen/agentd/v1/events_pb.js";
import type { SchedulerOptions } from "./options.ts";
import { type Claim, isLeaseLost, LeaseHeldError, type RunQueue } from "./port.ts";

export interface RunQueueHarness {
  /** A fresh, empty queue store with these options, and the event log holding its epochs. */
  open(opts: SchedulerOptions): Promise<{ queue: RunQueue; log: EventLog }>;
  /** `n` more queue objects on the store of the last open() (own connections where the adapter has them). */
  more(n: number): Promise<RunQueue[]>;
  cleanup(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const id = () => ulid();
const FAST = { leaseTtlMs: 300, pollMs: 50 } as const;
const CANCELLED: EventPayload = {
  case: "runCancelled",
  value: create(RunCancelledSchema, { reason: "ended in the log" }),
};

async function claimNow(q: RunQueue, worker = "w1"): Promise<Claim | undefined> {
  return q.claim(worker, { blockMs: 0 });
}

async function mustClaim(q: RunQueue, worker = "w1"): Promise<Claim> {
  const c = await q.claim(worker, { blockMs: 1000 });
  assert.ok(c, "expected a claimable run");
  return c;
}

export function runRunQueueConformance(name: string, h: RunQueueHarness): void {
  describe(`RunQueue conformance: ${name}`, () => {
    const opened: RunQueue[] = [];
    const open = async (o: SchedulerOptions) => {
      const r = await h.open(o);
      opened.push(r.queue);
      return r;
    };
    const more = async (n: number) => {
      const qs = await h.more(n);
      opened.push(...qs);
      return qs;
    };
    after(async () => {
      for (const q of opened) await q.close();
      await h.cleanup();
    });

    it("serves higher bands first among runs that became ready together, FIFO in a band", async () => {
      const { queue: q } = await open({ agingMs: 60_000 });
      const t = `t${id()}`;
      const order = [5, 9, 1, 3, 10, 1];
      const ids = order.map(() => id());
      for (const [i, p] of order.entries()) {
        const r = await q.enqueue({
          runId: ids[i] as string,
          tenantId: t,
          sessionId: `s${i}`,
          priority: p,
        });
        assert.deepEqual(r, { outcome: "queued", state: "ready" });
      }
      const got: string[] = [];
      for (let i = 0; i < order.length; i++) got.push((await mustClaim(q)).runId);
      assert.deepEqual(got, [ids[2], ids[5], ids[3], ids[0], ids[1], ids[4]]);
      assert.equal(await claimNow(q), undefined);
    });

    it("a steady stream of priority-1 runs cannot starve a priority-9 run", async () => {
      const agingMs = 30;
      const { queue: q } = await open({ agingMs, tenantLimit: 1000 });
      const t = `t${id()}`;
      const low = id();
      const t0 = Date.now();
      await q.enqueue({ runId: low, tenantId: t, sessionId: "low", priority: 9 });
      const p1 = async () => q.enqueue({ runId: id(), tenantId: t, sessionId: id(), priority: 1 });
      for (let i = 0; i < 3; i++) await p1();
      const claimed: number[] = [];
      let lowAt = 0;
      for (let i = 0; i < 500 && lowAt === 0; i++) {
        await p1(); // three or more priority-1 runs are always ready
        const c = await mustClaim(q);
        if (c.runId === low) lowAt = Date.now() - t0;
        claimed.push(c.priority);
        await q.release(c, { outcome: "terminal" });
        await sleep(5);
      }
      assert.ok(lowAt > 0, "the priority-9 run was never claimed");
      assert.equal(claimed[0], 1, "band 1 goes first");
      // It can only win once it is older than (9 - 1) * agingMs: priorities still count.
      assert.ok(lowAt >= 8 * agingMs - 5, `claimed after ${lowAt} ms`);
      assert.ok(lowAt < 3000, `claimed only after ${lowAt} ms`);
      assert.ok(claimed.slice(0, -1).every((p) => p === 1));
    });

    it("one active run per session: later runs wait for the earlier to end; positions", async () => {
      const { queue: q } = await open({ agingMs: 60_000 });
      const t = `t${id()}`;
      const [a1, a2, a3, b1] = [id(), id(), id(), id()];
      for (const [r, s] of [
        [a1, "A"],
        [a2, "A"],
        [a3, "A"],
        [b1, "B"],
      ] as const) {
        await q.enqueue({ runId: r, tenantId: t, sessionId: s, priority: 5 });
      }
      assert.deepEqual(await q.positionOf(a1), { state: "ready", session: 1, overall: 1 });
      assert.deepEqual(await q.positionOf(a2), {
        state: "waiting",
        session: 2,
        overall: 2,
        gate: "session",
      });
      assert.deepEqual(await q.positionOf(a3), {
        state: "waiting",
        session: 3,
        overall: 3,
        gate: "session",
      });
      assert.deepEqual(await q.positionOf(b1), { state: "ready", session: 1, overall: 4 });
      const c1 = await mustClaim(q);
      assert.equal(c1.runId, a1);
      assert.equal((await mustClaim(q)).runId, b1);
      assert.equal(await claimNow(q), undefined, "a2 waits for a1");
      assert.equal(await q.positionOf(a1), undefined, "a claimed run has no position");
      assert.deepEqual(await q.positionOf(a2), {
        state: "waiting",
        session: 2,
        overall: 1,
        gate: "session",
      });
      assert.deepEqual(await q.positionOf(a3), {
        state: "waiting",
        session: 3,
        overall: 2,
        gate: "session",
      });

      // Paused keeps the session; enqueue (ResolveApproval) makes it claimable again.
      await q.release(c1, { outcome: "paused" });
      assert.equal(await q.stateOf(a1), "paused");
      assert.deepEqual(await q.pausedRuns(10), [a1]);
      assert.equal(await claimNow(q), undefined, "a paused run still holds its session");
      assert.deepEqual(await q.enqueue({ runId: a1, tenantId: t, sessionId: "A", priority: 5 }), {
        outcome: "resumed",
        state: "ready",
      });
      assert.deepEqual(await q.pausedRuns(10), [], "resumed: no longer paused");
      const c1b = await mustClaim(q);
      assert.equal(c1b.runId, a1);
      assert.equal(c1b.reason, "resumed");
      assert.equal(c1b.attempt, 2);
      assert.ok(c1b.lease.epoch > c1.lease.epoch);
      await q.release(c1b, { outcome: "terminal" });
      const c2 = await mustClaim(q);
      assert.equal(c2.runId, a2);
      assert.equal(c2.reason, "new");
      assert.deepEqual(await q.positionOf(a3), {
        state: "waiting",
        session: 2,
        overall: 1,
        gate: "session",
      });
    });

    it("a tenant's runs over its limit stay queued; terminal and paused free a slot", async () => {
      const t = `t${id()}`;
      const u = `u${id()}`;
      const { queue: q } = await open({ agingMs: 60_000, tenantLimit: (x) => (x === t ? 2 : 10) });
      const ts = [id(), id(), id(), id()];
      for (const r of ts) await q.enqueue({ runId: r, tenantId: t, sessionId: r, priority: 5 });
      const other = id();
      await q.enqueue({ runId: other, tenantId: u, sessionId: "x", priority: 9 });
      assert.equal(await q.stateOf(ts[2] as string), "waiting");
      const got = [await mustClaim(q), await mustClaim(q), await mustClaim(q)];
      assert.deepEqual(
        got.map((c) => c.runId),
        [ts[0], ts[1], other],
      );
      assert.equal(await claimNow(q), undefined, "tenant at its limit");
      assert.equal((await q.positionOf(ts[2] as string))?.state, "waiting");
      await q.release(got[0] as Claim, { outcome: "terminal" });
      const c3 = await mustClaim(q);
      assert.equal(c3.runId, ts[2]);
      assert.equal(await claimNow(q), undefined);
      await q.release(c3, { outcome: "paused" });
      assert.equal((await mustClaim(q)).runId, ts[3]);
      // The paused run comes back, but must wait for a slot.
      assert.equal(
        (
          await q.enqueue({
            runId: ts[2] as string,
            tenantId: t,
            sessionId: ts[2] as string,
            priority: 5,
          })
        ).state,
        "waiting",
      );
      assert.equal(await claimNow(q), undefined);
      await q.release(got[1] as Claim, { outcome: "terminal" });
      assert.equal((await mustClaim(q)).runId, ts[2]);
    });

    it("published tenant limits: held runs say so, a raise admits them, a tenant dropped falls back; other tenants and queue objects agree", async () => {
      const t = `t${id()}`;
      const u = `u${id()}`;
      const { queue: q } = await open({ agingMs: 60_000, tenantLimit: 3 });
      const [q2] = (await more(1)) as [RunQueue];
      await q.setTenantLimits(new Map([[t, 1]]));
      const ts = [id(), id(), id()];
      for (const r of ts) await q.enqueue({ runId: r, tenantId: t, sessionId: r, priority: 5 });
      const us = [id(), id()];
      for (const r of us) await q.enqueue({ runId: r, tenantId: u, sessionId: r, priority: 5 });
      assert.equal((await q.positionOf(ts[0] as string))?.gate, undefined, "the first is ready");
      assert.equal((await q.positionOf(ts[1] as string))?.gate, "tenant");
      assert.deepEqual(await q.tenantSlots([t, u, `none${id()}`]), [1, 2, 0]);
      // Another queue object (another worker) admits by the published limit too.
      const first = await mustClaim(q2, "w2");
      assert.equal(first.runId, ts[0]);
      const ran = [(await mustClaim(q)).runId, (await mustClaim(q)).runId].sort();
      assert.deepEqual(ran, [...us].sort(), "the other tenant is not held");
      assert.equal(await claimNow(q), undefined, "t is at its published limit of 1");
      await q2.release(first, { outcome: "terminal" });
      assert.equal((await q.positionOf(ts[2] as string))?.gate, "tenant");
      const second = await mustClaim(q);
      assert.equal(second.runId, ts[1], "the next one starts when the first ends");
      assert.equal(await claimNow(q), undefined);
      // A reload that raises the limit releases the held run at once.
      await q.setTenantLimits(new Map([[t, 2]]));
      assert.equal((await q.positionOf(ts[2] as string))?.gate, undefined);
      assert.equal((await mustClaim(q)).runId, ts[2]);
      // Lowered below use: nobody is stopped, nobody new admitted until below it.
      await q.setTenantLimits(new Map([[t, 0]]));
      const late = id();
      await q.enqueue({ runId: late, tenantId: t, sessionId: late, priority: 5 });
      await q.release(second, { outcome: "terminal" });
      assert.equal((await q.positionOf(late))?.gate, "tenant", "1 running, limit 0: held");
      // The tenant removed from the file: the queue's own limit (3) applies again.
      await q.setTenantLimits(new Map());
      assert.equal((await q.positionOf(late))?.gate, undefined);
      assert.equal((await mustClaim(q2, "w2")).runId, late);
      await assert.rejects(q.setTenantLimits(new Map([[t, -1]])), (e) =>
        String((e as Error).message).includes(`tenants.${t}.limits.concurrentRuns`),
      );
    });

    it("enqueue is idempotent per run id and validates its input", async () => {
      const { queue: q } = await open({});
      const t = `t${id()}`;
      const r = id();
      const req = { runId: r, tenantId: t, sessionId: "s", priority: 3 };
      assert.equal((await q.enqueue(req)).outcome, "queued");
      assert.deepEqual(await q.enqueue(req), { outcome: "duplicate", state: "ready" });
      assert.deepEqual(await q.enqueue({ ...req, priority: 1 }), {
        outcome: "duplicate",
        state: "ready",
      });
      const c = await mustClaim(q);
      assert.deepEqual(await q.enqueue(req), { outcome: "duplicate", state: "claimed" });
      assert.equal(await claimNow(q), undefined, "one entry per run");
      await q.release(c, { outcome: "terminal" });
      assert.deepEqual(await q.enqueue(req), { outcome: "duplicate", state: "ended" });
      assert.equal(await claimNow(q), undefined, "an ended run is not run again");
      for (const priority of [0, 11, 2.5]) {
        await assert.rejects(q.enqueue({ ...req, runId: id(), priority }), (e) =>
          isAgentdError(e, "EVALIDATION"),
        );
      }
      await assert.rejects(q.enqueue({ ...req, runId: "a b" }), (e) =>
        isAgentdError(e, "EVALIDATION"),
      );
      await assert.rejects(q.enqueue({ ...req, runId: id(), tenantId: "a:b" }), (e) =>
        isAgentdError(e, "EVALIDATION"),
      );
    });

    it("cancelQueued removes waiting, ready and paused runs, never a claimed one", async () => {
      const t = `t${id()}`;
      const { queue: q } = await open({ agingMs: 60_000, tenantLimit: 2 });
      const [c1, c2, d1] = [id(), id(), id()];
      await q.enqueue({ runId: d1, tenantId: t, sessionId: "D", priority: 1 });
      await q.enqueue({ runId: c1, tenantId: t, sessionId: "C", priority: 5 });
      await q.enqueue({ runId: c2, tenantId: t, sessionId: "C", priority: 5 });
      const cd = await mustClaim(q);
      assert.equal(cd.runId, d1);
      assert.equal(await q.cancelQueued(d1), false, "claimed: its owner cancels it");
      assert.equal(await q.cancelQueued(c2), true, "waiting behind its session");
      assert.equal(await q.stateOf(c2), "ended");
      assert.equal(await q.cancelQueued(c1), true, "ready");
      assert.equal(await q.cancelQueued(c1), false, "already ended");
      assert.equal(await q.cancelQueued(id()), false, "unknown");
      assert.equal(await claimNow(q), undefined);
      // Over the tenant limit (2: d1 + e1 hold it), then paused.
      const [e1, e2, f1] = [id(), id(), id()];
      await q.enqueue({ runId: e1, tenantId: t, sessionId: "E", priority: 5 });
      await q.enqueue({ runId: e2, tenantId: t, sessionId: "E", priority: 5 });
      await q.enqueue({ runId: f1, tenantId: t, sessionId: "F", priority: 5 });
      assert.equal(await q.stateOf(f1), "waiting");
      assert.equal(await q.cancelQueued(f1), true, "waiting for a tenant slot");
      const ce = await mustClaim(q);
      assert.equal(ce.runId, e1);
      await q.release(ce, { outcome: "paused" });
      assert.deepEqual(await q.pausedRuns(10), [e1]);
      assert.equal(await claimNow(q), undefined, "e2 waits for the paused e1");
      assert.equal(await q.cancelQueued(e1), true, "paused");
      assert.deepEqual(await q.pausedRuns(10), [], "cancelled: no longer paused");
      const c = await mustClaim(q);
      assert.equal(c.runId, e2, "the session's next run moves up");
      await q.release(cd, { outcome: "terminal" });
      await q.release(c, { outcome: "terminal" });
      assert.equal(await claimNow(q), undefined, "cancelled runs never come back");
    });

    it("a run that ended in the event log is never handed out: its entry is dropped", async () => {
      const t = `t${id()}`;
      const { queue: q, log } = await open({ ...FAST, agingMs: 60_000, tenantLimit: 1 });
      const end = async (runId: string, session: string) =>
        log.append({ runId, sessionId: session, payload: CANCELLED });
      // Ready (holding the tenant's one slot), with its session's next run behind it.
      const [a1, a2] = [id(), id()];
      for (const r of [a1, a2]) {
        await log.append(queued(r, t, "A"));
        await q.enqueue({ runId: r, tenantId: t, sessionId: "A", priority: 5 });
      }
      await end(a1, "A");
      const c = await mustClaim(q);
      assert.equal(c.runId, a2, "the ended run is skipped; its session's next run moves up");
      assert.equal(await q.stateOf(a1), "ended", "its entry is gone");
      assert.equal(await q.positionOf(a1), undefined);
      await q.release(c, { outcome: "terminal" });
      assert.equal(await claimNow(q), undefined, "nothing left");

      // Paused, cancelled in the log, then enqueued again (a late ResolveApproval).
      const p1 = id();
      await log.append(queued(p1, t, "P"));
      await q.enqueue({ runId: p1, tenantId: t, sessionId: "P", priority: 5 });
      await q.release(await mustClaim(q), { outcome: "paused" });
      await end(p1, "P");
      await q.enqueue({ runId: p1, tenantId: t, sessionId: "P", priority: 5 });
      assert.equal(await claimNow(q), undefined, "not handed out");
      assert.equal(await q.stateOf(p1), "ended");

      // Requeued by its owner, and ended before anyone claimed it again.
      const r1 = id();
      await log.append(queued(r1, t, "R"));
      await q.enqueue({ runId: r1, tenantId: t, sessionId: "R", priority: 5 });
      await q.release(await mustClaim(q), { outcome: "requeue" });
      await end(r1, "R");
      assert.equal(await claimNow(q), undefined);
      assert.equal(await q.stateOf(r1), "ended");

      // Its owner ended it and died before releasing it: no takeover.
      const [d1, o1] = [id(), id()];
      await log.append(queued(d1, t, "D"));
      await q.enqueue({ runId: d1, tenantId: t, sessionId: "D", priority: 5 });
      const dc = await mustClaim(q, "dies");
      await log.append({ runId: d1, sessionId: "D", fence: dc.lease.epoch, payload: CANCELLED });
      await q.enqueue({ runId: o1, tenantId: t, sessionId: "O", priority: 5 });
      assert.equal(await q.stateOf(o1), "waiting", "the dead owner's claim holds the slot");
      const next = await q.claim("w2", { blockMs: 3000 });
      assert.equal(next?.runId, o1, "the ended run's slot went to the tenant's next run");
      assert.equal(await q.stateOf(d1), "ended");
      await assert.rejects(q.release(dc, { outcome: "terminal" }), isLeaseLost);
    });

    it("pausedRuns: the runs waiting for an approval, longest paused first, bounded", async () => {
      const t = `t${id()}`;
      const { queue: q } = await open({ agingMs: 60_000, tenantLimit: 10 });
      const runs = [id(), id(), id()];
      for (const [i, r] of runs.entries())
        await q.enqueue({ runId: r, tenantId: t, sessionId: `S${i}`, priority: 5 });
      const claims = [await mustClaim(q), await mustClaim(q), await mustClaim(q)];
      const byRun = new Map(claims.map((c) => [c.runId, c]));
      for (const r of [runs[2], runs[0], runs[1]]) {
        await q.release(byRun.get(r as string) as Claim, { outcome: "paused" });
        await new Promise((res) => setTimeout(res, 5));
      }
      assert.deepEqual(await q.pausedRuns(10), [runs[2], runs[0], runs[1]]);
      assert.deepEqual(await q.pausedRuns(2), [runs[2], runs[0]]);
      assert.deepEqual(await q.pausedRuns(0), []);
      await q.enqueue({ runId: runs[0] as string, tenantId: t, sessionId: "S0", priority: 5 });
      const back = await mustClaim(q);
      assert.equal(back.runId, runs[0]);
      await q.release(back, { outcome: "terminal" });
      assert.deepEqual(await q.pausedRuns(10), [runs[2], runs[1]], "ended: gone");
    });

    it("stats: queued runs by band (waiting ones included), paused runs; claimed ones in neither", async () => {
      const t = `t${id()}`;
      const { queue: q } = await open({ agingMs: 60_000, tenantLimit: 1 });
      const none = await q.stats();
      assert.deepEqual(none, { queuedByBand: new Array(10).fill(0), paused: 0 });
      const [a, b, c] = [id(), id(), id()];
      await q.enqueue({ runId: a, tenantId: t, sessionId: "S1", priority: 9 });
      await q.enqueue({ runId: b, tenantId: t, sessionId: "S2", priority: 2 });
      await q.enqueue({ runId: c, tenantId: t, sessionId: "S2", priority: 2 });
      let s = await q.stats();
      assert.equal(s.queuedByBand[8], 1, "band 9");
      assert.equal(s.queuedByBand[1], 2, "band 2: the session's second run waits too");
      assert.equal(s.paused, 0);
      const first = await mustClaim(q);
      assert.equal(first.runId, a);
      await q.release(first, { outcome: "paused" });
      s = await q.stats();
      assert.equal(s.queuedByBand[8], 0, "claimed, then paused: not queued");
      assert.equal(s.paused, 1);
      assert.equal(
        s.queuedByBand.reduce((x, y) => x + y, 0),
        2,
      );
    });

    it("requeue gives the run back at once, keeping its session and tenant slot", async () => {
      const t = `t${id()}`;
      const { queue: q } = await open({ ...FAST, agingMs: 60_000, tenantLimit: 1 });
      const [r1, r2, o1] = [id(), id(), id()];
      await q.enqueue({ runId: r1, tenantId: t, sessionId: "R", priority: 7 });
      await q.enqueue({ runId: r2, tenantId: t, sessionId: "R", priority: 7 });
      await q.enqueue({ runId: o1, tenantId: t, sessionId: "O", priority: 1 });
      const c1 = await mustClaim(q, "w1");
      assert.equal(c1.runId, r1);
      await q.release(c1, { outcome: "requeue" });
      assert.equal(await q.stateOf(r1), "ready");
      assert.equal((await q.positionOf(r1))?.session, 1);
      const c2 = await mustClaim(q, "w2");
      assert.equal(c2.runId, r1, "the requeued run, not the tenant's other run");
      assert.equal(c2.reason, "requeued");
      assert.equal(c2.attempt, 2);
      assert.equal(c2.lease.epoch, c1.lease.epoch + 1);
      await assert.rejects(q.leases.renew(c1.lease), isLeaseLost);
      await assert.rejects(q.release(c1, { outcome: "terminal" }), isLeaseLost);
      assert.equal(await q.stateOf(r1), "claimed", "a stale release leaves the new owner's claim");
      await q.release(c2, { outcome: "terminal" });
      const next = await mustClaim(q);
      assert.equal(next.runId, o1, "priority 1 of the same tenant");
    });

    it("leases: renew keeps a claim; an expired one is taken over with a new epoch that fences the old owner", async () => {
      const t = `t${id()}`;
      const { queue: q, log } = await open({ ...FAST });
      const [w2q] = await more(1);
      const q2 = w2q as RunQueue;
      const r = id();
      await log.append(queued(r, t, "L"));
      await q.enqueue({ runId: r, tenantId: t, sessionId: "L", priority: 5 });
      const c1 = await mustClaim(q, "w1");
      assert.equal(c1.reason, "new");
      assert.equal((await log.head(r))?.epoch, c1.lease.epoch, "the event log's own epoch");
      await log.append({ ...delta(r, "w1", "L"), fence: c1.lease.epoch });
      for (let i = 0; i < 6; i++) {
        await sleep(100);
        await q.leases.renew(c1.lease);
      }
      assert.equal(await claimNow(q2, "w2"), undefined, "heartbeats keep the claim past its ttl");

      // w1 stops heartbeating (SIGKILL): w2 takes over after the ttl.
      const t0 = Date.now();
      const c2 = await q2.claim("w2", { blockMs: 3000 });
      assert.ok(c2, "taken over");
      assert.equal(c2.runId, r);
      assert.equal(c2.reason, "takeover");
      assert.equal(c2.attempt, 2);
      assert.equal(c2.lease.epoch, c1.lease.epoch + 1);
      assert.ok(Date.now() - t0 >= 150, "not before the lease expired");
      await assert.rejects(
        q.leases.renew(c1.lease),
        (e) => isLeaseLost(e) && isAgentdError(e, "EFENCED"),
      );
      await assert.rejects(log.append({ ...delta(r, "late", "L"), fence: c1.lease.epoch }), (e) =>
        isAgentdError(e, "EFENCED"),
      );
      await log.append({ ...delta(r, "w2", "L"), fence: c2.lease.epoch });
      await assert.rejects(q.release(c1, { outcome: "terminal" }), isLeaseLost);
      assert.equal(await q.stateOf(r), "claimed");
      await q2.leases.renew(c2.lease);
      await q2.release(c2, { outcome: "terminal" });
      assert.equal(await q.stateOf(r), "ended");
    });

    it("a claim renewed late, before anyone took it over, is still held", async () => {
      const t = `t${id()}`;
      const { queue: q } = await open({ ...FAST });
      const r = id();
      await q.enqueue({ runId: r, tenantId: t, sessionId: "S", priority: 5 });
      const c = await mustClaim(q);
      await sleep(FAST.leaseTtlMs + 100);
      await q.leases.renew(c.lease);
      assert.equal(await claimNow(q, "w2"), undefined);
      await q.release(c, { outcome: "terminal" });
    });

    it("bare leases: acquire bumps the epoch, a held lease refuses others, a stale renew fails", async () => {
      const { queue: q, log } = await open({ ...FAST });
      const L = q.leases;
      const r = id();
      await log.append(queued(r, `t${id()}`, "S"));
      const a = await L.acquire(r, "a", 200);
      assert.equal(a.epoch, (await log.bumpEpoch(r)) - 1, "the event log's epoch");
      // The bump above fenced `a` on purpose: its renew fails.
      await assert.rejects(L.renew(a), isLeaseLost);
      const r2 = id();
      const b = await L.acquire(r2, "b", 200);
      await assert.rejects(L.acquire(r2, "c", 200), (e) => e instanceof LeaseHeldError);
      await L.renew(b);
      await L.release(b);
      await assert.rejects(L.renew(b), isLeaseLost, "released");
      const c = await L.acquire(r2, "c", 200);
      assert.equal(c.epoch, b.epoch + 1);
      await assert.rejects(L.renew(b), isLeaseLost, "taken over");
      await sleep(260);
      await assert.rejects(L.renew(c), isLeaseLost, "a bare lease cannot be renewed after expiry");
      const d = await L.acquire(r2, "d", 200);
      assert.equal(d.epoch, c.epoch + 1);
      // A run claimed through the queue changes owner only through claim().
      const t = `t${id()}`;
      const r3 = id();
      await q.enqueue({ runId: r3, tenantId: t, sessionId: "S", priority: 5 });
      const cl = await mustClaim(q);
      await assert.rejects(L.acquire(r3, "x", 200), (e) => e instanceof LeaseHeldError);
      await q.release(cl, { outcome: "terminal" });
    });

    it("a waiting claim wakes when a run arrives; abort and maxRuns end or hold it", async () => {
      const { queue: q } = await open({ pollMs: 5000 });
      const [other] = await more(1);
      const t = `t${id()}`;
      const t0 = Date.now();
      const waiting = q.claim("w1", { blockMs: 4000 });
      await sleep(50);
      const r = id();
      await (other as RunQueue).enqueue({ runId: r, tenantId: t, sessionId: "S", priority: 5 });
      const c = await waiting;
      assert.equal(c?.runId, r);
      assert.ok(Date.now() - t0 < 1500, "woken by the enqueue, not by the poll");

      const ac = new AbortController();
      const t1 = Date.now();
      const aborted = q.claim("w1", { blockMs: 4000, signal: ac.signal });
      setTimeout(() => ac.abort(), 50);
      assert.equal(await aborted, undefined);
      assert.ok(Date.now() - t1 < 1500);

      // w1 holds one claim (c) and may hold only one.
      const r2 = id();
      await q.enqueue({ runId: r2, tenantId: t, sessionId: "S2", priority: 5 });
      assert.equal(await q.claim("w1", { blockMs: 100, maxRuns: 1 }), undefined);
      const freed = q.claim("w1", { blockMs: 4000, maxRuns: 1 });
      await sleep(30);
      await q.release(c as Claim, { outcome: "terminal" });
      assert.equal((await freed)?.runId, r2);
    });

    it("5 workers claiming concurrently never hold one run at once; sessions stay in order", async () => {
      const { queue: first } = await open({ agingMs: 50, tenantLimit: 3 });
      const queues = [first, ...(await more(4))];
      const tenants = [`a${id()}`, `b${id()}`, `c${id()}`];
      const runs: { runId: string; tenantId: string; sessionId: string }[] = [];
      for (let i = 0; i < 40; i++) {
        const run = { runId: id(), tenantId: tenants[i % 3] as string, sessionId: `s${i % 8}` };
        runs.push(run);
        await first.enqueue({ ...run, priority: 1 + (i % 10) });
      }
      const active = new Map<string, string>();
      const activeSessions = new Set<string>();
      const perTenant = new Map<string, number>();
      const claimedOrder: string[] = [];
      const count = new Map<string, number>();
      let done = 0;
      await Promise.all(
        queues.map(async (q, wi) => {
          const worker = `w${wi}`;
          while (done < runs.length) {
            const c = await q.claim(worker, { blockMs: 200 });
            if (c === undefined) continue;
            assert.equal(active.get(c.runId), undefined, `run ${c.runId} held twice`);
            const sk = `${c.tenantId}/${c.sessionId}`;
            assert.ok(!activeSessions.has(sk), `session ${sk} active twice`);
            const n = (perTenant.get(c.tenantId) ?? 0) + 1;
            assert.ok(n <= 3, `tenant ${c.tenantId} over its limit`);
            active.set(c.runId, worker);
            activeSessions.add(sk);
            perTenant.set(c.tenantId, n);
            claimedOrder.push(c.runId);
            count.set(c.runId, (count.get(c.runId) ?? 0) + 1);
            await sleep(2 + Math.floor(Math.random() * 8));
            active.delete(c.runId);
            activeSessions.delete(sk);
            perTenant.set(c.tenantId, (perTenant.get(c.tenantId) ?? 1) - 1);
            await q.release(c, { outcome: "terminal" });
            done++;
          }
        }),
      );
      assert.equal(claimedOrder.length, runs.length);
      assert.ok(
        [...count.values()].every((n) => n === 1),
        "every run claimed exactly once",
      );
      for (const s of new Set(runs.map((r) => `${r.tenantId}/${r.sessionId}`))) {
        const mine = runs.filter((r) => `${r.tenantId}/${r.sessionId}` === s).map((r) => r.runId);
        assert.deepEqual(
          claimedOrder.filter((x) => mine.includes(x)),
          mine,
          `session ${s} in enqueue order`,
        );
      }
    });
  });
}
