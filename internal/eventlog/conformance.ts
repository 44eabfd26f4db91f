/**
 * The EventLog conformance suite. Every adapter (and any in-memory stand-in) must pass it;
 * each adapter's test file calls runEventLogConformance with a harness.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { ulid } from "ulid";
import { isAgentdError } from "../errors.ts";
import { OutputDeltaSchema, RunQueuedSchema } from "../gen/agentd/v1/events_pb.js";
import type { EventPayload, LoggedEvent } from "./event-codec.ts";
import { verifyChain } from "./hash-chain.ts";
import type { AppendRequest, EventLog } from "./port.ts";
import { rewoundConformance } from "./rewound-conformance.ts";
import { terminalConformance } from "./terminal-conformance.ts";

export interface ConformanceHarness {
  /** The log under test (one per suite; runs are isolated by fresh ids). */
  open(): Promise<EventLog>;
  /** `n` independent writers on the same storage (separate connections where the adapter has them). */
  writers(n: number): Promise<EventLog[]>;
  /** Simulates a crash-restart of the storage (or the process) and returns the log to use after it. */
  restart(): Promise<EventLog>;
  /**
   * Makes the storage lose every event of `runId` after `toSeq` (an AOF cut, a failover to
   * a lagging replica, files restored from an older backup) and returns the log to use.
   */
  rewind(runId: string, toSeq: number): Promise<EventLog>;
  /**
   * True when storage can lose events under a live log (Redis: a failover, an AOF cut and
   * restart); the embedded log is one process, rewound only across a restart (no follower
   * of the old process lives on), so the live-follower case does not apply to it.
   */
  rewindsLive: boolean;
  cleanup(): Promise<void>;
}

export function queued(runId: string, tenantId: string, sessionId = "s1"): AppendRequest {
  return {
    runId,
    sessionId,
    tenantId,
    payload: {
      case: "runQueued",
      value: create(RunQueuedSchema, { tenantId, prompt: "p", priority: 5 }),
    },
  };
}

export function delta(runId: string, text: string, sessionId = "s1"): AppendRequest {
  return { runId, sessionId, payload: delt(text) };
}

function delt(text: string): EventPayload {
  return { case: "outputDelta", value: create(OutputDeltaSchema, { text }) };
}

function textOf(ev: LoggedEvent): string {
  const p = ev.event.payload;
  return p.case === "outputDelta" ? p.value.text : "";
}

async function collect(it: AsyncIterable<LoggedEvent>, n: number): Promise<LoggedEvent[]> {
  const out: LoggedEvent[] = [];
  for await (const ev of it) {
    out.push(ev);
    if (out.length >= n) break;
  }
  return out;
}

export function runEventLogConformance(name: string, h: ConformanceHarness): void {
  describe(`EventLog conformance: ${name}`, () => {
    let log: EventLog;
    const tenant = `t-${ulid().toLowerCase()}`;
    after(async () => {
      await log?.close();
      await h.cleanup();
    });

    it("appends gap-free from seq 1, keeps order and chains hashes", async () => {
      log = await h.open();
      const runId = ulid();
      const first = await log.append(queued(runId, tenant));
      assert.equal(first.seq, 1);
      for (let i = 0; i < 9; i++) {
        const ev = await log.append(delta(runId, `m${i}`));
        assert.equal(ev.seq, i + 2);
      }
      const all = await log.read(runId, 0);
      assert.deepEqual(
        all.map((e) => e.seq),
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
      );
      assert.deepEqual(all.slice(1).map(textOf), [
        "m0",
        "m1",
        "m2",
        "m3",
        "m4",
        "m5",
        "m6",
        "m7",
        "m8",
      ]);
      assert.equal(all[0]?.type, "run.queued");
      const verdict = verifyChain(all.map((e) => e.json));
      assert.deepEqual(verdict.ok, true);
      const head = await log.head(runId);
      assert.equal(head?.seq, 10);
      assert.equal(head?.tenantId, tenant);
      assert.equal(head?.hash, all[9]?.event.hash);
    });

    it("20 concurrent appenders on one run never produce a gap or a duplicate", async () => {
      const writers = await h.writers(20);
      const runId = ulid();
      await log.append(queued(runId, tenant));
      const perWriter = 25;
      await Promise.all(
        writers.map(async (w, wi) => {
          // Each writer fires its appends without waiting, all at once.
          await Promise.all(
            Array.from({ length: perWriter }, (_, i) => w.append(delta(runId, `w${wi}-${i}`))),
          );
        }),
      );
      const all = await log.read(runId, 0);
      assert.equal(all.length, 1 + 20 * perWriter);
      assert.deepEqual(
        all.map((e) => e.seq),
        Array.from({ length: all.length }, (_, i) => i + 1),
      );
      const texts = all.slice(1).map(textOf);
      assert.equal(new Set(texts).size, texts.length, "no event stored twice");
      assert.equal(new Set(all.map((e) => e.event.eventId)).size, all.length);
      // One writer's fire-and-forget appends still land in the order it made them.
      for (let wi = 0; wi < 20; wi++) {
        const mine = texts.filter((t) => t.startsWith(`w${wi}-`));
        assert.deepEqual(
          mine,
          Array.from({ length: perWriter }, (_, i) => `w${wi}-${i}`),
        );
      }
      assert.equal(verifyChain(all.map((e) => e.json)).ok, true);
    });

    it("many busy runs at once: each run gap-free, in order, chained", async () => {
      // Appends to 40 runs issued in one go, while earlier commits are still in flight
      // (Redis: split over several script calls; file: one group commit per run file).
      const [w1, w2] = await h.writers(2);
      const runs = Array.from({ length: 40 }, () => ulid());
      await Promise.all(runs.map((r) => log.append(queued(r, tenant))));
      const per = 12;
      await Promise.all(
        runs.flatMap((r, ri) =>
          Array.from({ length: per }, (_, i) =>
            (i % 3 === 2 ? (ri % 2 === 0 ? w1 : w2) : log)?.append(delta(r, `r${ri}-${i}`)),
          ),
        ),
      );
      for (const [ri, r] of runs.entries()) {
        const all = await log.read(r, 0);
        assert.deepEqual(
          all.map((e) => e.seq),
          Array.from({ length: per + 1 }, (_, i) => i + 1),
        );
        const texts = all.slice(1).map(textOf);
        assert.equal(new Set(texts).size, per, `run ${ri}: no event twice`);
        // Each writer's own appends keep the order it made them in.
        const own = texts.filter((t) => Number(t.split("-")[1]) % 3 !== 2);
        assert.deepEqual(
          own,
          [...own].sort((a, b) => Number(a.split("-")[1]) - Number(b.split("-")[1])),
        );
        assert.equal(verifyChain(all.map((e) => e.json)).ok, true, `run ${ri}: chain`);
      }
      const heads = await log.heads(runs);
      assert.deepEqual(
        heads.map((x) => x?.seq),
        runs.map(() => per + 1),
      );
    });

    it("rejects a fenced (stale) writer with EFENCED and writes nothing", async () => {
      const runId = ulid();
      await log.append(queued(runId, tenant));
      const e1 = await log.bumpEpoch(runId);
      await log.append({ ...delta(runId, "owner1"), fence: e1 });
      const e2 = await log.bumpEpoch(runId);
      assert.equal(e2, e1 + 1);
      await assert.rejects(
        log.append({ ...delta(runId, "late write of owner1"), fence: e1 }),
        (err) => isAgentdError(err, "EFENCED"),
      );
      assert.equal((await log.head(runId))?.seq, 2);
      const ok = await log.append({ ...delta(runId, "owner2"), fence: e2 });
      assert.equal(ok.seq, 3);
      assert.equal((await log.head(runId))?.epoch, e2);
    });

    it("compare-and-append fails with ECONFLICT when the run moved on", async () => {
      const runId = ulid();
      await log.append(queued(runId, tenant));
      await log.append({ ...delta(runId, "x"), expectedSeq: 1 });
      await assert.rejects(log.append({ ...delta(runId, "y"), expectedSeq: 1 }), (err) =>
        isAgentdError(err, "ECONFLICT"),
      );
      assert.equal((await log.head(runId))?.seq, 2);
    });

    it("requires a tenant on the first event and caps event size", async () => {
      const runId = ulid();
      await assert.rejects(log.append(delta(runId, "no tenant")), (err) =>
        isAgentdError(err, "EVALIDATION"),
      );
      assert.equal(await log.head(runId), undefined);
      await log.append(queued(runId, tenant));
      await assert.rejects(log.append(delta(runId, "x".repeat(600 * 1024))), (err) =>
        isAgentdError(err, "ETOOLARGE"),
      );
      assert.equal((await log.head(runId))?.seq, 1);
    });

    it("reads ranges", async () => {
      const runId = ulid();
      await log.append(queued(runId, tenant));
      for (let i = 0; i < 9; i++) await log.append(delta(runId, `r${i}`));
      assert.deepEqual(
        (await log.read(runId, 3, 4)).map((e) => e.seq),
        [4, 5, 6, 7],
      );
      assert.deepEqual(
        (await log.read(runId, 8)).map((e) => e.seq),
        [9, 10],
      );
      assert.deepEqual(await log.read(runId, 10), []);
      assert.deepEqual(await log.read(ulid(), 0), []);
    });

    it("follows: history then live events, exactly once, in order", async () => {
      const runId = ulid();
      await log.append(queued(runId, tenant));
      await log.append(delta(runId, "h1"));
      await log.append(delta(runId, "h2"));
      const ac = new AbortController();
      const fromStart = collect(log.follow(runId, 0, ac.signal), 10);
      const fromMiddle = collect(log.follow(runId, 2, ac.signal), 8);
      await new Promise((r) => setTimeout(r, 50));
      for (let i = 0; i < 7; i++) {
        await log.append(delta(runId, `live${i}`));
        if (i === 3) await new Promise((r) => setTimeout(r, 20));
      }
      const a = await fromStart;
      const b = await fromMiddle;
      ac.abort();
      assert.deepEqual(
        a.map((e) => e.seq),
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
      );
      assert.deepEqual(
        b.map((e) => e.seq),
        [3, 4, 5, 6, 7, 8, 9, 10],
      );
      assert.equal(textOf(a[9] as LoggedEvent), "live6");
    });

    it("follows in batches: consecutive events, each exactly once, in order", async () => {
      const runId = ulid();
      await log.append(queued(runId, tenant));
      for (let i = 0; i < 5; i++) await log.append(delta(runId, `h${i}`));
      const ac = new AbortController();
      const batches: number[][] = [];
      const done = (async () => {
        for await (const batch of log.followBatches(runId, 2, ac.signal)) {
          batches.push(batch.map((e) => e.seq));
          if (batch.at(-1)?.seq === 46) return;
        }
      })();
      await new Promise((r) => setTimeout(r, 50));
      // Bursts of concurrent appends: live batches of several events.
      for (let b = 0; b < 8; b++) {
        await Promise.all(
          Array.from({ length: 5 }, (_, i) => log.append(delta(runId, `l${b}.${i}`))),
        );
      }
      await done;
      ac.abort();
      const seqs = batches.flat();
      assert.deepEqual(
        seqs,
        Array.from({ length: 44 }, (_, i) => i + 3),
      );
      assert.ok(batches.every((b) => b.length > 0));
    });

    it("a follower stops when its signal aborts", async () => {
      const runId = ulid();
      await log.append(queued(runId, tenant));
      const ac = new AbortController();
      const seen: number[] = [];
      const done = (async () => {
        for await (const ev of log.follow(runId, 0, ac.signal)) seen.push(ev.seq);
      })();
      await new Promise((r) => setTimeout(r, 50));
      ac.abort();
      await done;
      assert.deepEqual(seen, [1]);
    });

    it("lists a tenant's runs newest first, by session, paginated", async () => {
      const t2 = `t2-${ulid().toLowerCase()}`;
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const id = ulid();
        ids.push(id);
        await log.append(queued(id, t2, i % 2 === 0 ? "even" : "odd"));
        await new Promise((r) => setTimeout(r, 2));
      }
      const newestFirst = [...ids].reverse();
      const p1 = await log.listRunIds({ tenantId: t2, limit: 2 });
      assert.deepEqual(p1.runIds, newestFirst.slice(0, 2));
      const p2 = await log.listRunIds({ tenantId: t2, limit: 2, before: p1.next });
      assert.deepEqual(p2.runIds, newestFirst.slice(2, 4));
      const p3 = await log.listRunIds({ tenantId: t2, limit: 2, before: p2.next });
      assert.deepEqual(p3.runIds, newestFirst.slice(4));
      assert.equal(p3.next, undefined);
      const even = await log.listRunIds({ tenantId: t2, sessionId: "even", limit: 10 });
      assert.deepEqual(even.runIds, [ids[4], ids[2], ids[0]]);
      const other = await log.listRunIds({ tenantId: `nobody-${ulid()}`, limit: 10 });
      assert.deepEqual(other.runIds, []);
      const heads = await log.heads([ids[0] as string, ulid()]);
      assert.equal(heads[0]?.sessionId, "even");
      assert.equal(heads[1], undefined);
    });

    it("the feed: every commit of every run once, in order, from any id, across a restart", async () => {
      const start = await log.feedHead();
      const other = `${tenant}-b`;
      const [a, b] = [ulid(), ulid()];
      await Promise.all([log.append(queued(a, tenant)), log.append(queued(b, other))]);
      await Promise.all(
        Array.from({ length: 12 }, (_, i) => log.append(delta(i % 2 === 0 ? a : b, `f${i}`))),
      );
      const mine = async () => {
        const all = await log.readFeed(start, 10_000);
        return all.filter((e) => e.runId === a || e.runId === b);
      };
      const entries = await mine();
      for (const [run, t] of [
        [a, tenant],
        [b, other],
      ] as const) {
        const seqs = entries
          .filter((e) => e.runId === run)
          .flatMap((e) => {
            assert.equal(e.tenantId, t, "the entry names the run's tenant");
            return Array.from({ length: e.toSeq - e.fromSeq + 1 }, (_, i) => e.fromSeq + i);
          });
        assert.deepEqual(seqs, [1, 2, 3, 4, 5, 6, 7], `run ${run}: every event once, in order`);
      }
      const ids = entries.map((e) => e.id);
      assert.equal(new Set(ids).size, ids.length, "ids are unique");
      for (const [i, id] of ids.entries()) {
        const from = await log.readFeed(id, 2);
        assert.equal(from[0]?.id, id, "readFeed starts at the id it is given");
        if (i + 1 < ids.length && from[1]?.runId !== undefined)
          assert.ok(from[1].id !== id, "the next entry follows");
      }
      assert.equal(await log.feedHead(), ids[ids.length - 1], "the head is the newest entry");
      assert.deepEqual(await log.readFeed(start, 0), [], "limit 0 reads nothing");
      log = await h.restart();
      assert.deepEqual(await mine(), entries, "the feed survives a restart as it was");
      const next = await log.append(delta(a, "after restart"));
      const tail = await log.readFeed(await log.feedHead(), 1);
      assert.deepEqual(
        [tail[0]?.runId, tail[0]?.fromSeq, tail[0]?.toSeq],
        [a, next.seq, next.seq],
        "a new commit is the newest entry",
      );
    });

    it("keeps every acknowledged event across a restart", async () => {
      const runId = ulid();
      await log.append(queued(runId, tenant));
      for (let i = 0; i < 20; i++) await log.append(delta(runId, `d${i}`));
      const epoch = await log.bumpEpoch(runId);
      const before = (await log.read(runId, 0)).map((e) => e.json);
      log = await h.restart();
      const afterRestart = (await log.read(runId, 0)).map((e) => e.json);
      assert.deepEqual(afterRestart, before);
      assert.equal((await log.head(runId))?.epoch, epoch);
      const next = await log.append({ ...delta(runId, "after restart"), fence: epoch });
      assert.equal(next.seq, 22);
      assert.equal(verifyChain((await log.read(runId, 0)).map((e) => e.json)).ok, true);
    });

    it("a run's name key: one per run, the same for every caller and across a restart, in no event", async () => {
      const runId = ulid();
      await log.append(queued(runId, tenant));
      const [k1, k2] = await Promise.all([log.runNameKey(runId), log.runNameKey(runId)]);
      assert.equal(k1.length, 32);
      assert.deepEqual(Buffer.from(k2), Buffer.from(k1), "two racing callers get one key");
      const other = await log.runNameKey(ulid());
      assert.notDeepEqual(Buffer.from(other), Buffer.from(k1), "each run has its own");
      const hex = Buffer.from(k1).toString("hex");
      log = await h.restart();
      assert.equal(Buffer.from(await log.runNameKey(runId)).toString("hex"), hex);
      const stored = (await log.read(runId, 0)).map((e) => e.json).join("\n");
      assert.equal(stored.includes(hex), false, "the key is in an event");
      const feed = JSON.stringify(await log.readFeed("", 10_000));
      assert.equal(feed.includes(hex), false, "the key is in the feed");
    });

    terminalConformance({
      harness: h,
      tenant,
      log: () => log,
      setLog: (l) => {
        log = l;
      },
      queued,
      delta,
    });

    rewoundConformance({
      tenant,
      log: () => log,
      setLog: (l) => {
        log = l;
      },
      rewind: (runId, toSeq) => h.rewind(runId, toSeq),
      rewindsLive: h.rewindsLive,
      queued,
      delta,
    });
  });
}
