/**
 * The terminal rule of the EventLog conformance suite: after run.completed, run.failed or
 * run.cancelled every append fails with EENDED (RunEndedError), whoever appends and however,
 * including under a race of many writers and after a restart. Registered by
 * runEventLogConformance (conformance.ts) inside its suite, on the suite's log.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { ulid } from "ulid";
import { isAgentdError } from "../errors.ts";
import {
  ErrorInfoSchema,
  RunCancelledSchema,
  RunCompletedSchema,
  RunFailedSchema,
} from "../gen/agentd/v1/events_pb.js";
import type { ConformanceHarness } from "./conformance.ts";
import type { EventPayload, LoggedEvent } from "./event-codec.ts";
import { verifyChain } from "./hash-chain.ts";
import type { AppendRequest, EventLog } from "./port.ts";
import { isRunEnded } from "./run-ended-error.ts";

const TERMINALS = ["run.completed", "run.failed", "run.cancelled"] as const;
type Terminal = (typeof TERMINALS)[number];

function terminal(type: Terminal): EventPayload {
  switch (type) {
    case "run.completed":
      return { case: "runCompleted", value: create(RunCompletedSchema, { summary: "done" }) };
    case "run.failed":
      return {
        case: "runFailed",
        value: create(RunFailedSchema, {
          error: create(ErrorInfoSchema, { code: "EX", message: "x" }),
        }),
      };
    case "run.cancelled":
      return { case: "runCancelled", value: create(RunCancelledSchema, { reason: "stop" }) };
  }
}

/** Rejects with RunEndedError naming the run, its terminal type and seq: never anything else. */
async function assertEnded(
  p: Promise<unknown>,
  runId: string,
  endedBy: string,
  endSeq: number,
): Promise<void> {
  await assert.rejects(p, (err) => {
    assert.ok(isRunEnded(err), `expected EENDED, got ${String(err)}`);
    assert.equal(err.code, "EENDED");
    assert.equal(err.runId, runId);
    assert.equal(err.endedBy, endedBy);
    assert.equal(err.endSeq, endSeq);
    assert.match(err.message, new RegExp(`run ${runId} already ended \\(${endedBy}`));
    return true;
  });
}

function endAt(events: LoggedEvent[]): number {
  return events.findIndex((e) => TERMINALS.includes(e.type as Terminal));
}

export interface TerminalSuite {
  harness: ConformanceHarness;
  tenant: string;
  /** The suite's current log (replaced by a restart). */
  log(): EventLog;
  setLog(log: EventLog): void;
  queued(runId: string, tenantId: string): AppendRequest;
  delta(runId: string, text: string): AppendRequest;
}

export function terminalConformance(s: TerminalSuite): void {
  const { harness: h, tenant } = s;

  for (const type of TERMINALS) {
    it(`refuses every append after ${type} with EENDED, whoever appends and however`, async () => {
      const log = s.log();
      const runId = ulid();
      await log.append(s.queued(runId, tenant));
      const epoch = await log.bumpEpoch(runId);
      await log.append({ ...s.delta(runId, "before"), fence: epoch });
      const end = await log.append({
        runId,
        sessionId: "s1",
        fence: epoch,
        payload: terminal(type),
      });
      assert.equal(end.seq, 3);
      const [other] = await h.writers(1);
      const attempts: AppendRequest[] = [
        s.delta(runId, "unfenced"),
        { ...s.delta(runId, "owner"), fence: epoch },
        { ...s.delta(runId, "stale owner"), fence: epoch - 1 },
        { ...s.delta(runId, "cas on the head"), expectedSeq: 3 },
        { ...s.delta(runId, "cas on an old head"), expectedSeq: 2 },
        { ...s.delta(runId, "cas as a new run"), expectedSeq: 0 },
        { runId, sessionId: "s1", payload: terminal("run.cancelled") },
        { runId, sessionId: "s1", fence: epoch, payload: terminal(type) },
      ];
      for (const req of attempts) {
        await assertEnded(log.append(req), runId, type, 3);
        // Another writer (its own connection, where the adapter has them).
        await assertEnded((other as EventLog).append(req), runId, type, 3);
      }
      const head = await log.head(runId);
      assert.equal(head?.seq, 3);
      assert.equal(head?.ended, type);
      const all = await log.read(runId, 0);
      assert.deepEqual(
        all.map((e) => e.type),
        ["run.queued", "output.delta", type],
      );
      assert.equal(verifyChain(all.map((e) => e.json)).ok, true);
    });
  }

  it("a batch never holds an event after a terminal one: those behind it get EENDED", async () => {
    const log = s.log();
    const runId = ulid();
    await log.append(s.queued(runId, tenant));
    const epoch = await log.bumpEpoch(runId);
    // Issued in one synchronous block: one group commit unless the terminal ends it.
    const reqs: AppendRequest[] = [
      { ...s.delta(runId, "a"), fence: epoch },
      { ...s.delta(runId, "b"), fence: epoch },
      { runId, sessionId: "s1", fence: epoch, payload: terminal("run.completed") },
      { ...s.delta(runId, "after 1"), fence: epoch },
      { ...s.delta(runId, "after 2"), fence: epoch },
      { runId, sessionId: "s1", fence: epoch, payload: terminal("run.failed") },
    ];
    const settled = await Promise.allSettled(reqs.map((r) => log.append(r)));
    assert.deepEqual(
      settled.slice(0, 3).map((r) => (r.status === "fulfilled" ? r.value.seq : r.reason)),
      [2, 3, 4],
    );
    for (const r of settled.slice(3)) {
      assert.equal(r.status, "rejected");
      assert.ok(isRunEnded(r.reason), String(r.reason));
      assert.equal(r.reason.endSeq, 4);
      assert.equal(r.reason.endedBy, "run.completed");
    }
    const all = await log.read(runId, 0);
    assert.equal(all.length, 4);
    assert.equal(all.at(-1)?.type, "run.completed");
    assert.equal(verifyChain(all.map((e) => e.json)).ok, true);
  });

  it("20 writers racing terminal appends: one terminal, nothing after it, every loser EENDED", async () => {
    const writers = await h.writers(20);
    const runId = ulid();
    await s.log().append(s.queued(runId, tenant));
    const epoch = await s.log().bumpEpoch(runId);
    const unexpected: unknown[] = [];
    const endErrors: { endedBy: string; endSeq: number }[] = [];
    const landed: { seq: number; terminal: boolean }[] = [];
    // Each writer appends until the log tells it the run ended; some end the run.
    const race = writers.map(async (w, i) => {
      const style = i % 4; // 0 unfenced, 1 fenced, 2 compare-and-append, 3 stale fence
      for (let k = 0; ; k++) {
        const ending = i % 5 === 0 && k === 3 + i;
        const base: AppendRequest = ending
          ? { runId, sessionId: "s1", payload: terminal(TERMINALS[i % 3] as Terminal) }
          : s.delta(runId, `w${i}-${k}`);
        const req: AppendRequest = { ...base };
        if (style === 1 || (ending && style !== 0)) req.fence = epoch;
        if (style === 3 && !ending) req.fence = epoch - 1;
        if (style === 2) req.expectedSeq = (await w.head(runId))?.seq ?? 0;
        try {
          const ev = await w.append(req);
          landed.push({ seq: ev.seq, terminal: ending });
        } catch (err) {
          if (isRunEnded(err)) {
            endErrors.push({ endedBy: err.endedBy, endSeq: err.endSeq });
            return;
          }
          const expected =
            (style === 2 && isAgentdError(err, "ECONFLICT")) ||
            (style === 3 && !ending && isAgentdError(err, "EFENCED"));
          if (!expected) {
            unexpected.push(err);
            return;
          }
        }
        if (k % 4 === 3) await new Promise((r) => setTimeout(r, 1));
      }
    });
    await Promise.all(race);
    assert.deepEqual(unexpected, [], "only EENDED (and ECONFLICT/EFENCED before the end)");
    const all = await s.log().read(runId, 0);
    const ends = all.filter((e) => TERMINALS.includes(e.type as Terminal));
    assert.equal(ends.length, 1, "exactly one terminal event");
    const end = ends[0] as LoggedEvent;
    assert.equal(endAt(all), all.length - 1, "nothing after the terminal event");
    assert.equal(verifyChain(all.map((e) => e.json)).ok, true);
    assert.equal(landed.filter((l) => l.terminal).length, 1);
    assert.ok(landed.every((l) => l.seq <= end.seq));
    assert.equal(endErrors.length, writers.length, "every writer stopped on EENDED");
    for (const e of endErrors) assert.deepEqual(e, { endedBy: end.type, endSeq: end.seq });
  });

  it("an ended run stays ended after a restart", async () => {
    const runs = new Map<string, Terminal>();
    for (const type of TERMINALS) {
      const runId = ulid();
      await s.log().append(s.queued(runId, tenant));
      await s.log().append(s.delta(runId, "x"));
      await s.log().append({ runId, sessionId: "s1", payload: terminal(type) });
      runs.set(runId, type);
    }
    const live = ulid();
    await s.log().append(s.queued(live, tenant));
    s.setLog(await h.restart());
    const log = s.log();
    for (const [runId, type] of runs) {
      assert.equal((await log.head(runId))?.ended, type);
      await assertEnded(log.append(s.delta(runId, "after restart")), runId, type, 3);
      await assertEnded(log.append({ ...s.delta(runId, "cas"), expectedSeq: 3 }), runId, type, 3);
      assert.equal((await log.read(runId, 0)).length, 3);
    }
    assert.equal((await log.head(live))?.ended, undefined);
    assert.equal((await log.append(s.delta(live, "still live"))).seq, 2);
  });
}
