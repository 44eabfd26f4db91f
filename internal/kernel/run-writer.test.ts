/**
 * The gate before every effect: a cancel request is never skipped, a lost lease is fenced,
 * a store that lost what the drive saw is refused; begin() records the effect's start only
 * where the gate would have let it through.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { isAgentdError } from "../errors.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { isLogRewound } from "../eventlog/log-rewound-error.ts";
import { RedisEventLog } from "../eventlog/redis-event-log.ts";
import {
  OutputDeltaSchema,
  RunCancelledSchema,
  RunCancelRequestedSchema,
  ToolStartedSchema,
} from "../gen/agentd/v1/events_pb.js";
import { rewindRun } from "../testing/redis-rewind.ts";
import { startRedis } from "../testing/redis-server.ts";
import { queueRun } from "../testing/worker-fixtures.ts";
import { createRunSecrets } from "./run-secrets.ts";
import { createRunWriter } from "./run-writer.ts";

let dir: string;
let log: FileEventLog;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-writer-"));
  log = await openFileEventLog({ dir });
});
after(async () => {
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

const delta = { case: "outputDelta" as const, value: create(OutputDeltaSchema, { text: "x" }) };

it("a cancel request that landed before the drive's own appends still stops the next effect", async () => {
  const q = await queueRun(log, { prompt: "p" });
  const fence = await log.bumpEpoch(q.runId);
  const w = createRunWriter({ log, ...q, fence, secrets: createRunSecrets(), head: 1 });
  assert.deepEqual(await w.gate(), []);
  await log.append({
    ...q,
    payload: {
      case: "runCancelRequested",
      value: create(RunCancelRequestedSchema, { reason: "stop" }),
    },
  });
  await w.append(delta); // moves the writer's head past the unread request
  await assert.rejects(w.gate(), (e) => isAgentdError(e, "ECANCELLED"));
});

it("a drive whose lease moved on is fenced at the gate, before the effect", async () => {
  const q = await queueRun(log, { prompt: "p" });
  const fence = await log.bumpEpoch(q.runId);
  const w = createRunWriter({ log, ...q, fence, secrets: createRunSecrets(), head: 1 });
  await w.append(delta);
  assert.deepEqual(await w.gate(), [], "its own append, known without a read");
  await log.bumpEpoch(q.runId); // another worker took the run over
  await assert.rejects(w.gate(), (e) => isAgentdError(e, "EFENCED"));
});

it("reads back only what others appended: its own events right after the checked one are known", async () => {
  const q = await queueRun(log, { prompt: "p" });
  const fence = await log.bumpEpoch(q.runId);
  const w = createRunWriter({ log, ...q, fence, secrets: createRunSecrets(), head: 1 });
  await w.append(delta);
  await w.append(delta);
  assert.deepEqual(await w.gate(), []);
  await log.append({ ...q, fence, payload: delta }); // someone else (same epoch)
  await w.append(delta);
  const read = await w.gate();
  assert.deepEqual(
    read.map((e) => Number(e.event.seq)),
    [4, 5],
    "the foreign event and what followed",
  );
  assert.deepEqual(await w.gate(), []);
});

it("a store that lost what the drive saw: the gate and every append refuse (EREWOUND), nothing sealed", async () => {
  const redis = await startRedis();
  try {
    const rlog = new RedisEventLog({ client: redis.client(), prefix: "w:" });
    const q = await queueRun(rlog, { prompt: "p" });
    const fence = await rlog.bumpEpoch(q.runId);
    const w = createRunWriter({ log: rlog, ...q, fence, secrets: createRunSecrets(), head: 1 });
    for (let i = 0; i < 3; i++) await w.append(delta);
    assert.equal(w.head(), 4);
    await rewindRun(redis.client(), "w:", q.runId, 2);
    await assert.rejects(w.gate(), (e) => {
      assert.ok(isLogRewound(e), String(e));
      assert.deepEqual([e.expected.seq, e.stored.seq], [4, 2]);
      return true;
    });
    await assert.rejects(w.append(delta), (e) => isLogRewound(e));
    // Even after other events brought the store past the drive's head (another chain).
    for (let i = 0; i < 3; i++) await rlog.append({ ...q, payload: delta });
    await assert.rejects(w.append(delta), (e) => isLogRewound(e));
    assert.equal((await rlog.head(q.runId))?.seq, 5, "nothing of this writer was sealed");
    await rlog.close();
  } finally {
    await redis.stop();
  }
});

const started = (callId: string) => ({
  case: "toolStarted" as const,
  value: create(ToolStartedSchema, { callId, workerId: "w" }),
});

it("begin: the record lands right after what the drive checked, fenced, in one compare-and-append", async () => {
  const q = await queueRun(log, { prompt: "p" });
  const fence = await log.bumpEpoch(q.runId);
  const w = createRunWriter({ log, ...q, fence, secrets: createRunSecrets(), head: 1 });
  await w.append(delta);
  const ev = await w.begin(started("c1"));
  assert.equal(ev.seq, 3);
  assert.equal(ev.type, "tool.started");
  assert.deepEqual(await w.gate(), [], "its own record: nothing to read back");
  // Someone else appended (same epoch, nothing to stop for): read, then recorded after it.
  await log.append({ ...q, fence, payload: delta });
  const after = await w.begin(started("c2"));
  assert.equal(after.seq, 5);
  assert.deepEqual(
    (await log.read(q.runId, 0)).map((e) => e.type),
    ["run.queued", "output.delta", "tool.started", "output.delta", "tool.started"],
  );
});

it("begin: a cancel request, a lost lease or the run's end stop it before anything is recorded", async () => {
  const q = await queueRun(log, { prompt: "p" });
  const fence = await log.bumpEpoch(q.runId);
  const w = createRunWriter({ log, ...q, fence, secrets: createRunSecrets(), head: 1 });
  await log.append({
    ...q,
    payload: {
      case: "runCancelRequested",
      value: create(RunCancelRequestedSchema, { reason: "stop" }),
    },
  });
  await assert.rejects(w.begin(started("c1")), (e) => isAgentdError(e, "ECANCELLED"));
  const fenced = await queueRun(log, { prompt: "p" });
  const old = await log.bumpEpoch(fenced.runId);
  const w2 = createRunWriter({ log, ...fenced, fence: old, secrets: createRunSecrets(), head: 1 });
  await log.bumpEpoch(fenced.runId); // another worker took it over
  await assert.rejects(w2.begin(started("c1")), (e) => isAgentdError(e, "EFENCED"));
  const ended = await queueRun(log, { prompt: "p" });
  const e3 = await log.bumpEpoch(ended.runId);
  const w3 = createRunWriter({ log, ...ended, fence: e3, secrets: createRunSecrets(), head: 1 });
  await log.append({
    ...ended,
    fence: e3,
    payload: { case: "runCancelled", value: create(RunCancelledSchema, { reason: "x" }) },
  });
  await assert.rejects(w3.begin(started("c1")), (e) => isAgentdError(e, "EENDED"));
  for (const r of [q, fenced, ended])
    assert.ok(
      !(await log.read(r.runId, 0)).some((e) => e.type === "tool.started"),
      "nothing recorded",
    );
});
