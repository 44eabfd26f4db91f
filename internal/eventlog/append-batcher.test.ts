/**
 * AppendBatcher when storage fails mid-commit: every append settles (none hangs), the
 * failure stays with the group that was sent, and a commit that landed before its reply
 * was lost is acknowledged, not failed (a caller retrying it would store it twice). And the
 * terminal rule at the batcher: a group ends with a terminal event, nothing is sent after it.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { OutputDeltaSchema, RunCompletedSchema } from "../gen/agentd/v1/events_pb.js";
import { AppendBatcher, type Commit, type Head } from "./append-batcher.ts";
import { GENESIS_HASH } from "./hash-chain.ts";
import type { AppendRequest } from "./port.ts";
import { isRunEnded } from "./run-ended-error.ts";

const delta = (text: string): AppendRequest => ({
  runId: "r",
  sessionId: "s",
  tenantId: "t",
  payload: { case: "outputDelta", value: create(OutputDeltaSchema, { text }) },
});

/** One run's storage in memory; `fail(n)` makes commit number n throw (after or before storing). */
function storage() {
  let head: Head = { seq: 0, hash: GENESIS_HASH };
  const sent: number[] = [];
  const stored: string[] = [];
  const failures = new Map<number, "before" | "after">();
  let commits = 0;
  let headFails = false;
  return {
    stored,
    /** Events per commit that reached storage. */
    sent,
    fail(n: number, when: "before" | "after") {
      failures.set(n, when);
    },
    failHeads(on: boolean) {
      headFails = on;
    },
    batcher: new AppendBatcher({
      loadHead: async () => {
        if (headFails) throw new Error("head unreadable");
        return head;
      },
      commit: async (c: Commit) => {
        const n = ++commits;
        sent.push(c.events.length);
        await new Promise((r) => setTimeout(r, 5));
        const when = failures.get(n);
        if (when === "before") throw new Error(`commit ${n} lost`);
        if (head.ended !== undefined) return { kind: "conflict", head };
        if (c.prev.seq !== head.seq || c.prev.hash !== head.hash) {
          return { kind: "conflict", head };
        }
        for (const e of c.events) stored.push(e.json);
        const last = c.events[c.events.length - 1];
        if (last) head = { seq: last.seq, hash: last.hash, ended: c.ends };
        if (when === "after") throw new Error(`reply to commit ${n} lost`);
        return { kind: "ok" };
      },
    }),
  };
}

const text = (json: string): string => {
  const ev = JSON.parse(json);
  return ev.outputDelta?.text ?? ev.type;
};

const completed = (): AppendRequest => ({
  runId: "r",
  sessionId: "s",
  payload: { case: "runCompleted", value: create(RunCompletedSchema, { summary: "ok" }) },
});

it("a commit that fails settles its own appends; the ones queued behind it commit", async () => {
  const s = storage();
  s.fail(1, "before");
  const first = s.batcher.append(delta("a"));
  await new Promise((r) => setTimeout(r, 1)); // "b" queues while "a" is in flight
  const second = s.batcher.append(delta("b"));
  await assert.rejects(first, /commit 1 lost/);
  const b = await second;
  assert.equal(b.seq, 1);
  assert.deepEqual(s.stored.map(text), ["b"]);
});

it("a commit that landed before its reply was lost is acknowledged, once", async () => {
  const s = storage();
  s.fail(1, "after");
  const appends = ["a", "b", "c"].map((t) => s.batcher.append(delta(t)));
  const [a, b, c] = await Promise.all(appends);
  assert.deepEqual([a?.seq, b?.seq, c?.seq], [1, 2, 3]);
  const d = await s.batcher.append(delta("d"));
  assert.equal(d.seq, 4);
  assert.deepEqual(s.stored.map(text), ["a", "b", "c", "d"]);
});

it("when the head cannot be read after a failed commit, that group fails and nothing hangs", async () => {
  const s = storage();
  s.fail(1, "before");
  const first = s.batcher.append(delta("a"));
  s.failHeads(false);
  await new Promise((r) => setTimeout(r, 1));
  s.failHeads(true);
  const second = s.batcher.append(delta("b"));
  await assert.rejects(first, /commit 1 lost/);
  await assert.rejects(second, /head unreadable/);
  s.failHeads(false);
  const third = await s.batcher.append(delta("c"));
  assert.equal(third.seq, 1);
  assert.deepEqual(s.stored.map(text), ["c"]);
});

it("a group commit ends at a terminal event; the appends behind it fail with EENDED unsent", async () => {
  const s = storage();
  const all = [delta("a"), completed(), delta("b"), delta("c")].map((r) => s.batcher.append(r));
  const settled = await Promise.allSettled(all);
  assert.deepEqual(
    settled.slice(0, 2).map((r) => r.status === "fulfilled" && r.value.seq),
    [1, 2],
  );
  for (const r of settled.slice(2)) {
    assert.ok(r.status === "rejected" && isRunEnded(r.reason), String(r));
    assert.deepEqual(
      [r.reason.runId, r.reason.endedBy, r.reason.endSeq],
      ["r", "run.completed", 2],
    );
  }
  assert.deepEqual(s.sent, [2], "one commit, ending with the terminal event");
  assert.deepEqual(s.stored.map(text), ["a", "run.completed"]);
  await assert.rejects(s.batcher.append(delta("later")), isRunEnded);
  assert.deepEqual(s.sent, [2], "a known end needs no storage call");
});

it("a terminal commit whose reply was lost is acknowledged; what was queued behind it gets EENDED", async () => {
  const s = storage();
  s.fail(1, "after");
  const first = [delta("a"), completed()].map((r) => s.batcher.append(r));
  await new Promise((r) => setTimeout(r, 1));
  const behind = s.batcher.append(delta("b"));
  const [a, end] = await Promise.all(first);
  assert.deepEqual([a?.seq, end?.seq], [1, 2]);
  await assert.rejects(behind, (err) => isRunEnded(err) && err.endSeq === 2);
  assert.deepEqual(s.stored.map(text), ["a", "run.completed"]);
});

it("a commit lost while another writer ended the run fails with EENDED, not the storage error", async () => {
  let head: Head = { seq: 4, hash: "h4" };
  const batcher = new AppendBatcher({
    loadHead: async () => head,
    commit: async () => {
      // The other writer's terminal event lands; this commit's connection drops.
      head = { seq: 5, hash: "h5", ended: "run.cancelled" };
      throw new Error("connection lost");
    },
  });
  await assert.rejects(
    batcher.append(delta("x")),
    (err) => isRunEnded(err) && err.endSeq === 5 && err.endedBy === "run.cancelled",
  );
});
