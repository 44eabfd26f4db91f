import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { create, equals } from "@bufbuild/protobuf";
import { ulid } from "ulid";
import { delta, queued } from "../eventlog/conformance.ts";
import { openFileEventLog } from "../eventlog/file-event-log.ts";
import { isRunEnded } from "../eventlog/run-ended-error.ts";
import {
  type Event,
  RunCancelledSchema,
  RunCancelRequestedSchema,
  RunCompletedSchema,
  RunStartedSchema,
  ToolCallSchema,
} from "../gen/agentd/v1/events_pb.js";
import { RunSchema, RunState } from "../gen/agentd/v1/run_service_pb.js";
import { RunProjectionCache } from "./run-cache.ts";
import { projectRun } from "./run-projection.ts";

const dir = mkdtempSync(join(tmpdir(), "agentd-proj-"));
after(() => rmSync(dir, { recursive: true, force: true }));

it("the cached projection and one rebuilt from the log give the same answer", async () => {
  const log = await openFileEventLog({ dir });
  const cache = new RunProjectionCache({ log });
  const runId = ulid();
  await log.append(queued(runId, "acme", "sess-1"));
  const q = await cache.get(runId);
  assert.equal(q?.state, RunState.QUEUED);
  assert.equal(q?.tenantId, "acme");
  assert.equal(q?.sessionId, "sess-1");

  await log.append({
    runId,
    sessionId: "sess-1",
    payload: { case: "runStarted", value: create(RunStartedSchema, { workerId: "w1", epoch: 1n }) },
  });
  for (let i = 0; i < 3; i++) {
    await log.append({
      runId,
      sessionId: "sess-1",
      payload: {
        case: "toolCall",
        value: create(ToolCallSchema, { callId: `c${i}`, tool: "repo.read" }),
      },
    });
    await log.append(delta(runId, `out${i}`, "sess-1"));
  }
  const mid = await cache.get(runId); // cached up to here; the rest is caught up incrementally
  assert.equal(mid?.state, RunState.RUNNING);
  assert.equal(mid?.toolCallCount, 3n);
  await log.append({
    runId,
    sessionId: "sess-1",
    payload: {
      case: "runCompleted",
      value: create(RunCompletedSchema, { summary: "done", costMicros: 42n }),
    },
  });
  // The log refuses anything after the terminal event (EENDED): nothing can change it.
  await assert.rejects(log.append(delta(runId, "late delta", "sess-1")), isRunEnded);

  const incremental = await cache.get(runId);
  cache.drop();
  const rebuilt = await cache.get(runId);
  const direct = projectRun(
    runId,
    (await log.read(runId, 0)).map((e) => e.event),
  );
  assert.ok(incremental && rebuilt);
  assert.ok(equals(RunSchema, incremental, rebuilt), "incremental == rebuilt");
  assert.ok(equals(RunSchema, incremental, direct), "incremental == pure fold");
  assert.equal(incremental.state, RunState.COMPLETED, "a terminal state never changes");
  assert.equal(incremental.lastSeq, 9n);
  assert.equal(incremental.eventCount, 9n);
  assert.equal(incremental.summary, "done");
  assert.equal(incremental.costMicros, 42n);
  assert.ok(incremental.startedAt && incremental.endedAt && incremental.createdAt);
  await log.close();
});

it("concurrent readers see at least the head they read", async () => {
  const log = await openFileEventLog({ dir: join(dir, "b") });
  const cache = new RunProjectionCache({ log });
  const runId = ulid();
  await log.append(queued(runId, "acme"));
  const reads: Promise<unknown>[] = [];
  for (let i = 0; i < 50; i++) {
    const ev = await log.append(delta(runId, `x${i}`));
    reads.push(cache.get(runId).then((r) => assert.ok((r?.lastSeq ?? 0n) >= BigInt(ev.seq))));
  }
  await Promise.all(reads);
  await log.close();
});

it("cancel_requested is set by run.cancel_requested and kept; a terminal state never changes", async () => {
  const log = await openFileEventLog({ dir: join(dir, "c") });
  const runId = ulid();
  const base = { runId, sessionId: "s1" };
  await log.append(queued(runId, "acme"));
  await log.append({
    ...base,
    payload: { case: "runStarted", value: create(RunStartedSchema, { workerId: "w1", epoch: 1n }) },
  });
  const events = async (): Promise<Event[]> => (await log.read(runId, 0)).map((e) => e.event);
  assert.equal(projectRun(runId, await events()).cancelRequested, false);
  await log.append({
    ...base,
    payload: {
      case: "runCancelRequested",
      value: create(RunCancelRequestedSchema, { reason: "stop", requestedBy: "alice" }),
    },
  });
  const requested = projectRun(runId, await events());
  assert.equal(requested.state, RunState.RUNNING, "still running until its owner ends it");
  assert.equal(requested.cancelRequested, true);
  await log.append({
    ...base,
    payload: { case: "runCancelled", value: create(RunCancelledSchema, { reason: "stop" }) },
  });
  const all = await events();
  const ended = projectRun(runId, all);
  assert.equal(ended.state, RunState.CANCELLED);
  assert.equal(ended.cancelRequested, true);
  // A log written before the end was enforced may hold events after it: the fold ignores
  // them for the state.
  const late = { ...(all[2] as Event), seq: 5n };
  const resumed = { ...(all[1] as Event), seq: 6n };
  assert.equal(projectRun(runId, [...all, late, resumed]).state, RunState.CANCELLED);
  await log.close();
});
