/**
 * The Redis append script sent twice: ioredis re-sends a command whose reply was lost when
 * the connection dropped (a Redis restart), so a commit that already landed arrives again.
 * It must be acknowledged, not reported as a conflict (the writer would then re-seal the
 * same events on the new head: duplicates). Regression test of the chaos suite's finding.
 * Also the script's terminal rule: a replayed terminal commit is acknowledged, anything else
 * after it answers ENDED, for runs stored before the end was recorded in the meta hash too.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import type { Redis } from "ioredis";
import {
  OutputDeltaSchema,
  RunCancelledSchema,
  RunCompletedSchema,
  RunQueuedSchema,
} from "../gen/agentd/v1/events_pb.js";
import { startRedis, type TestRedis } from "../testing/redis-server.ts";
import { APPEND_LUA } from "./append-lua.ts";
import { type SealedEvent, sealEvent } from "./event-codec.ts";
import { GENESIS_HASH } from "./hash-chain.ts";
import { RedisEventLog } from "./redis-event-log.ts";
import { isRunEnded } from "./run-ended-error.ts";

let redis: TestRedis;
let client: Redis;

before(async () => {
  redis = await startRedis();
  client = redis.client();
});
after(async () => {
  await redis?.stop();
});

function seal(runId: string, texts: string[], prev: { seq: number; hash: string }) {
  const out: SealedEvent[] = [];
  let hash = prev.hash;
  for (const [i, text] of texts.entries()) {
    const s = sealEvent(
      {
        runId,
        sessionId: "s",
        payload: { case: "outputDelta", value: create(OutputDeltaSchema, { text }) },
      },
      prev.seq + i + 1,
      hash,
      Date.now(),
    );
    out.push(s);
    hash = s.hash;
  }
  return out;
}

/** One script call for one run, exactly as redis-event-log.ts builds it. */
function call(
  runId: string,
  prev: { seq: number; hash: string },
  events: SealedEvent[],
  ends = "",
) {
  const keys = [
    `agentd:run:${runId}:events`,
    `agentd:run:${runId}:meta`,
    "agentd:tenant:t:runs",
    "agentd:tenant:t:session:s:runs",
    "agentd:feed",
  ];
  const args = [
    "",
    prev.seq,
    prev.hash,
    0, // no known-head check
    "",
    runId,
    "t",
    "s",
    events.at(-1)?.hash ?? "",
    ends,
    events.length,
    ...events.map((e) => e.json),
  ];
  return client.eval(APPEND_LUA, keys.length, ...keys, ...args) as Promise<string[][]>;
}

it("a commit sent again after it landed is acknowledged and writes nothing", async () => {
  const log = new RedisEventLog({ client });
  const runId = "replay1";
  const q = await log.append({
    runId,
    sessionId: "s",
    tenantId: "t",
    payload: { case: "runQueued", value: create(RunQueuedSchema, { tenantId: "t", prompt: "p" }) },
  });
  const prev = { seq: 1, hash: q.event.hash };
  const batch = seal(runId, ["a", "b", "c"], prev);
  assert.deepEqual(await call(runId, prev, batch), [["OK", "4"]]);
  assert.deepEqual(await call(runId, prev, batch), [["OK", "4"]], "the replay is acknowledged");
  // Another writer moves the head on; the replay is still recognised.
  await log.append({
    runId,
    sessionId: "s",
    payload: { case: "outputDelta", value: create(OutputDeltaSchema, { text: "d" }) },
  });
  assert.deepEqual(await call(runId, prev, batch), [["OK", "4"]]);
  const texts = (await log.read(runId, 0)).map((e) =>
    e.event.payload.case === "outputDelta" ? e.event.payload.value.text : e.type,
  );
  assert.deepEqual(texts, ["run.queued", "a", "b", "c", "d"]);
  // The feed has each commit once: the replays added nothing.
  const feed = (await log.readFeed("", 100)).filter((e) => e.runId === runId);
  assert.deepEqual(
    feed.map((e) => [e.fromSeq, e.toSeq]),
    [
      [1, 1],
      [2, 4],
      [5, 5],
    ],
  );
  // A different batch sealed against the same old head is still a conflict.
  const other = seal(runId, ["x"], prev);
  const [reply] = await call(runId, prev, other);
  assert.equal(reply?.[0], "CONFLICT");
  assert.equal(reply?.[1], "5");
  await log.close();
});

it("the first event of a run, sent again, is acknowledged (CreateRun's compare-and-append)", async () => {
  const runId = "replay2";
  const first = sealEvent(
    {
      runId,
      sessionId: "s",
      payload: {
        case: "runQueued",
        value: create(RunQueuedSchema, { tenantId: "t", prompt: "p" }),
      },
    },
    1,
    GENESIS_HASH,
    Date.now(),
  );
  const prev = { seq: 0, hash: GENESIS_HASH };
  assert.deepEqual(await call(runId, prev, [first]), [["OK", "1"]]);
  assert.deepEqual(await call(runId, prev, [first]), [["OK", "1"]]);
  assert.equal(await client.xlen(`agentd:run:${runId}:events`), 1);
});

it("a terminal commit sent again is acknowledged; any other commit after it answers ENDED", async () => {
  const log = new RedisEventLog({ client });
  const runId = "replay3";
  const q = await log.append({
    runId,
    sessionId: "s",
    tenantId: "t",
    payload: { case: "runQueued", value: create(RunQueuedSchema, { tenantId: "t", prompt: "p" }) },
  });
  const prev = { seq: 1, hash: q.event.hash };
  const done = sealEvent(
    {
      runId,
      sessionId: "s",
      payload: { case: "runCompleted", value: create(RunCompletedSchema, { summary: "ok" }) },
    },
    2,
    prev.hash,
    Date.now(),
  );
  assert.deepEqual(await call(runId, prev, [done], "run.completed"), [["OK", "2"]]);
  assert.deepEqual(await call(runId, prev, [done], "run.completed"), [["OK", "2"]]);
  // Sealed on the old head (a writer that has not seen the end) or on the new one: refused.
  assert.deepEqual(await call(runId, prev, seal(runId, ["late"], prev)), [
    ["ENDED", "run.completed", "2", done.hash],
  ]);
  const onEnd = { seq: 2, hash: done.hash };
  assert.deepEqual(await call(runId, onEnd, seal(runId, ["after"], onEnd)), [
    ["ENDED", "run.completed", "2", done.hash],
  ]);
  assert.equal(await client.xlen(`agentd:run:${runId}:events`), 2);
  assert.equal(await client.hget(`agentd:run:${runId}:meta`, "ended"), "run.completed");
  await log.close();
});

it("a run stored before the end was recorded (no `ended` field) is still refused after its terminal event", async () => {
  const log = new RedisEventLog({ client });
  const [ended, live] = ["legacy-ended", "legacy-live"];
  for (const runId of [ended, live]) {
    await log.append({
      runId,
      sessionId: "s",
      tenantId: "t",
      payload: {
        case: "runQueued",
        value: create(RunQueuedSchema, { tenantId: "t", prompt: "p" }),
      },
    });
  }
  await log.append({
    runId: ended,
    sessionId: "s",
    payload: { case: "runCancelled", value: create(RunCancelledSchema, { reason: "x" }) },
  });
  // As an older version of agentd left them: no `ended` field in the meta hash.
  await client.hdel(`agentd:run:${ended}:meta`, "ended");
  await client.hdel(`agentd:run:${live}:meta`, "ended");
  const other = new RedisEventLog({ client });
  await assert.rejects(
    other.append({
      runId: ended,
      sessionId: "s",
      payload: { case: "outputDelta", value: create(OutputDeltaSchema, { text: "late" }) },
    }),
    (err) => isRunEnded(err) && err.endedBy === "run.cancelled" && err.endSeq === 2,
  );
  assert.equal(await client.hget(`agentd:run:${ended}:meta`, "ended"), "run.cancelled");
  const ev = await other.append({
    runId: live,
    sessionId: "s",
    payload: { case: "outputDelta", value: create(OutputDeltaSchema, { text: "on" }) },
  });
  assert.equal(ev.seq, 2);
  assert.equal(await client.hget(`agentd:run:${live}:meta`, "ended"), "");
  await log.close();
  await other.close();
});
