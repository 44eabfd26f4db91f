/**
 * The rewound-log part of the EventLog conformance suite (conformance.ts): a store that
 * lost acknowledged events refuses an append whose writer saw more (EREWOUND, both heads
 * named, nothing written), whether the store is simply behind or holds other events past
 * the lost ones; a log that only moved on is not "rewound"; and a follower whose delivered
 * events the store no longer holds is told (EREWOUND), never handed the other chain.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { ulid } from "ulid";
import type { LoggedEvent } from "./event-codec.ts";
import { verifyChain } from "./hash-chain.ts";
import { isLogRewound, type LogRewoundError } from "./log-rewound-error.ts";
import type { AppendRequest, EventLog } from "./port.ts";

export interface RewoundSuite {
  tenant: string;
  /** The suite's current log (a rewind may replace it). */
  log(): EventLog;
  setLog(log: EventLog): void;
  /**
   * Makes the storage lose every event of `runId` after `toSeq` (as an AOF cut or a
   * failover to a lagging replica would) and returns the log to use after it.
   */
  rewind(runId: string, toSeq: number): Promise<EventLog>;
  /** Whether the live-follower case applies (see ConformanceHarness.rewindsLive). */
  rewindsLive: boolean;
  queued(runId: string, tenantId: string): AppendRequest;
  delta(runId: string, text: string): AppendRequest;
}

async function write(s: RewoundSuite, runId: string, n: number): Promise<LoggedEvent[]> {
  const out = [await s.log().append(s.queued(runId, s.tenant))];
  for (let i = 1; i < n; i++) out.push(await s.log().append(s.delta(runId, `e${i + 1}`)));
  return out;
}

const headOf = (ev: LoggedEvent) => ({ seq: ev.seq, hash: ev.event.hash });

async function refusal(p: Promise<unknown>): Promise<LogRewoundError> {
  const err = await p.then(
    () => assert.fail("the append was accepted on a rewound log"),
    (e: unknown) => e,
  );
  assert.ok(isLogRewound(err), `expected EREWOUND, got ${String(err)}`);
  return err;
}

export function rewoundConformance(s: RewoundSuite): void {
  it("refuses an append whose writer saw more than the store holds (EREWOUND), writes nothing", async () => {
    const runId = ulid();
    const evs = await write(s, runId, 5);
    const seen = headOf(evs[4] as LoggedEvent);
    s.setLog(await s.rewind(runId, 3));
    const err = await refusal(
      s.log().append({ ...s.delta(runId, "sealed on the old head"), knownHead: seen }),
    );
    assert.equal(err.code, "EREWOUND");
    assert.deepEqual(err.expected, seen);
    assert.deepEqual(err.stored, headOf(evs[2] as LoggedEvent));
    assert.match(err.message, /lost events/);
    const stored = await s.log().read(runId, 0);
    assert.equal(stored.length, 3, "nothing was written on the older head");
    // The loss can still be recorded explicitly on the stored head (no knownHead).
    const rec = await s.log().append({ ...s.delta(runId, "the record"), expectedSeq: 3 });
    assert.equal(rec.seq, 4);
    assert.equal(verifyChain((await s.log().read(runId, 0)).map((e) => e.json)).ok, true);
  });

  it("refuses it too when other events now sit past the lost ones (a fork)", async () => {
    const runId = ulid();
    const evs = await write(s, runId, 5);
    const seen = headOf(evs[4] as LoggedEvent);
    s.setLog(await s.rewind(runId, 3));
    for (let i = 0; i < 3; i++) await s.log().append(s.delta(runId, `other ${i}`));
    const err = await refusal(s.log().append({ ...s.delta(runId, "stale"), knownHead: seen }));
    assert.equal(err.stored.seq, 6);
    assert.equal((await s.log().read(runId, 0)).length, 6);
  });

  it("a log that only moved on past the known head is not rewound", async () => {
    const runId = ulid();
    const evs = await write(s, runId, 5);
    const ev = await s
      .log()
      .append({ ...s.delta(runId, "after"), knownHead: headOf(evs[2] as LoggedEvent) });
    assert.equal(ev.seq, 6);
    const again = await s.log().append({ ...s.delta(runId, "at"), knownHead: headOf(ev) });
    assert.equal(again.seq, 7);
  });

  // Only where storage can lose events under a live log (Redis): the embedded log is
  // rewound only across a restart, when no follower of the old process lives on.
  if (!s.rewindsLive) return;
  it("a follower whose delivered events the store lost gets EREWOUND, not the other chain", async () => {
    const runId = ulid();
    await write(s, runId, 4);
    const ac = new AbortController();
    const got: LoggedEvent[] = [];
    let outcome: unknown;
    const followed = (async () => {
      try {
        for await (const ev of s.log().follow(runId, 0, ac.signal)) got.push(ev);
      } catch (err) {
        outcome = err;
      }
    })();
    const log0 = s.log();
    // Wait (up to 60 s on a loaded machine) for the history to be delivered.
    for (let i = 0; i < 600 && got.length < 4; i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal(got.length, 4, "the follower got the history");
    await log0.append(s.delta(runId, "e5"));
    for (let i = 0; i < 600 && got.length < 5; i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal(got.length, 5, "the follower got the live event");
    s.setLog(await s.rewind(runId, 3));
    // Other events past the lost ones: a follower must not take them as the continuation.
    for (let i = 0; i < 4; i++) await s.log().append(s.delta(runId, `fork ${i}`));
    // Wait (up to 60 s: the tail's check runs when a blocking read times out) for the end.
    for (let i = 0; i < 600 && outcome === undefined; i++)
      await new Promise((r) => setTimeout(r, 100));
    ac.abort();
    await followed;
    assert.ok(isLogRewound(outcome), `expected EREWOUND, got ${String(outcome)}`);
    assert.equal(outcome.stored.seq <= 7, true);
    assert.deepEqual(
      got.map((e) => e.seq),
      [1, 2, 3, 4, 5],
      "no event of the other chain was delivered",
    );
  });
}
