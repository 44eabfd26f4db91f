/**
 * AppendBatcher when storage fails mid-commit: every append settles (none hangs), the
 * failure stays with the group that was sent, and a commit that landed before its reply
 * was lost is acknowledged, not failed (a caller retrying it would store it twice).
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { OutputDeltaSchema } from "../gen/agentd/v1/events_pb.js";
import { AppendBatcher, type Commit, type Head } from "./append-batcher.ts";
import { GENESIS_HASH } from "./hash-chain.ts";
import type { AppendRequest } from "./port.ts";

const delta = (text: string): AppendRequest => ({
  runId: "r",
  sessionId: "s",
  tenantId: "t",
  payload: { case: "outputDelta", value: create(OutputDeltaSchema, { text }) },
});

/** One run's storage in memory; `fail(n)` makes commit number n throw (after or before storing). */
function storage() {
  let head: Head = { seq: 0, hash: GENESIS_HASH };
  const stored: string[] = [];
  const failures = new Map<number, "before" | "after">();
  let commits = 0;
  let headFails = false;
  return {
    stored,
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
        await new Promise((r) => setTimeout(r, 5));
        const when = failures.get(n);
        if (when === "before") throw new Error(`commit ${n} lost`);
        if (c.prev.seq !== head.seq || c.prev.hash !== head.hash) {
          return { kind: "conflict", head };
        }
        for (const e of c.events) stored.push(e.json);
        const last = c.events[c.events.length - 1];
        if (last) head = { seq: last.seq, hash: last.hash };
        if (when === "after") throw new Error(`reply to commit ${n} lost`);
        return { kind: "ok" };
      },
    }),
  };
}

const text = (json: string): string => JSON.parse(json).outputDelta.text;

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
