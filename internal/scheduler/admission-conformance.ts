/**
 * The RunAdmission conformance suite: the Redis script and the embedded stand-in must
 * behave the same. After admit() the run is in the log (seq 1, on the genesis hash, the
 * chain going on from it) and in the queue; a refused admit writes neither.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { ulid } from "ulid";
import { isAgentdError } from "../errors.ts";
import { delta, queued } from "../eventlog/conformance.ts";
import { verifyChain } from "../eventlog/hash-chain.ts";
import type { EventLog } from "../eventlog/port.ts";
import type { RunAdmission } from "./admission.ts";
import type { RunQueue } from "./port.ts";

export interface AdmissionHarness {
  /** A fresh, empty log and queue, and the admission writing to both. */
  open(): Promise<{ admission: RunAdmission; log: EventLog; queue: RunQueue }>;
  cleanup(): Promise<void>;
}

const first = (runId: string, tenantId: string, sessionId = "s1") => {
  const q = queued(runId, tenantId, sessionId);
  return { ...q, tenantId };
};

export function runAdmissionConformance(name: string, h: AdmissionHarness): void {
  describe(`RunAdmission conformance: ${name}`, () => {
    const queues: RunQueue[] = [];
    const open = async () => {
      const r = await h.open();
      queues.push(r.queue);
      return r;
    };
    after(async () => {
      for (const q of queues) await q.close();
      await h.cleanup();
    });

    it("admit: the run is in the log at seq 1 and claimable, and the chain goes on from it", async () => {
      const { admission, log, queue } = await open();
      const runId = ulid();
      const ev = await admission.admit({ first: first(runId, "t1"), priority: 5 });
      assert.equal(ev.seq, 1);
      assert.equal(ev.event.payload.case, "runQueued");
      const head = await log.head(runId);
      assert.equal(head?.seq, 1);
      assert.equal(head?.tenantId, "t1");
      assert.equal(head?.sessionId, "s1");
      assert.equal(await queue.stateOf(runId), "ready");
      const stored = await log.read(runId, 0);
      assert.deepEqual(
        stored.map((e) => e.json),
        [ev.json],
        "the stored event is the one answered",
      );
      // The log's own appends continue the chain the admission began.
      const next = await log.append(delta(runId, "hello"));
      assert.equal(next.seq, 2);
      assert.equal(verifyChain((await log.read(runId, 0)).map((e) => e.json)).ok, true);
      const ids = await log.listRunIds({ tenantId: "t1", limit: 10 });
      assert.ok(ids.runIds.includes(runId), "the tenant index names the run");
      const c = await queue.claim("w1", { blockMs: 1000 });
      assert.equal(c?.runId, runId);
      assert.equal(c?.reason, "new");
      assert.equal(c?.priority, 5);
    });

    it("a second admit of the same run is ECONFLICT and queues nothing more", async () => {
      const { admission, queue } = await open();
      const runId = ulid();
      await admission.admit({ first: first(runId, "t1"), priority: 3 });
      await assert.rejects(
        admission.admit({ first: first(runId, "t1"), priority: 3 }),
        (err: unknown) => isAgentdError(err, "ECONFLICT"),
      );
      const c = await queue.claim("w1", { blockMs: 1000 });
      assert.equal(c?.runId, runId);
      assert.equal(await queue.claim("w2", { blockMs: 0 }), undefined, "queued once");
    });

    it("a run whose log exists already is refused and never enqueued", async () => {
      const { admission, log, queue } = await open();
      const runId = ulid();
      await log.append(first(runId, "t1"));
      await assert.rejects(
        admission.admit({ first: first(runId, "t1"), priority: 5 }),
        (err: unknown) => isAgentdError(err, "ECONFLICT"),
      );
      assert.equal(await queue.stateOf(runId), undefined);
      assert.equal((await log.head(runId))?.seq, 1, "the log is as it was");
    });

    for (const priority of [0, 11, 2.5, Number.NaN]) {
      it(`priority ${priority}: EVALIDATION naming priority, nothing written`, async () => {
        const { admission, log, queue } = await open();
        const runId = ulid();
        await assert.rejects(
          admission.admit({ first: first(runId, "t1"), priority }),
          (err: unknown) => isAgentdError(err, "EVALIDATION") && /priority/.test(String(err)),
        );
        assert.equal(await log.head(runId), undefined);
        assert.equal(await queue.stateOf(runId), undefined);
      });
    }

    it("runs of one session: the later one waits behind the first", async () => {
      const { admission, queue } = await open();
      const [a, b] = [ulid(), ulid()];
      await admission.admit({ first: first(a, "t1", "S"), priority: 5 });
      await admission.admit({ first: first(b, "t1", "S"), priority: 5 });
      assert.equal(await queue.stateOf(a), "ready");
      assert.equal(await queue.stateOf(b), "waiting");
    });
  });
}
