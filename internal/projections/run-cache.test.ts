/**
 * The run projection cache against a log that lost events (issue #26: a rewound log), on
 * the embedded log: the run's file is cut back and the log opened again, as a restore or
 * a lost disk write would leave it. A cached fold past the stored head, at its seq with
 * another hash, or whose next stored event does not chain onto it, is folded again from
 * the start: the cache never answers with events the log no longer holds.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, beforeEach, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import type { EventLog } from "../eventlog/port.ts";
import {
  RunFailedSchema,
  RunStartedSchema,
  ToolCallSchema,
  ToolResultSchema,
} from "../gen/agentd/v1/events_pb.js";
import { RunState } from "../gen/agentd/v1/run_service_pb.js";
import { queueRun } from "../testing/worker-fixtures.ts";
import { RunProjectionCache } from "./run-cache.ts";

const dirs: string[] = [];
let dir: string;
let current: FileEventLog;
/** The cache's log: whichever file log is open now. */
const log = new Proxy({} as EventLog, {
  get: (_, k) => {
    const v = Reflect.get(current, k, current);
    return typeof v === "function" ? v.bind(current) : v;
  },
});

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-run-cache-"));
  dirs.push(dir);
  current = await openFileEventLog({ dir });
});
after(async () => {
  await current?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** queued, started, a call and its result: seq 4, RUNNING. */
async function fourEvents(): Promise<{ runId: string; sessionId: string }> {
  const run = await queueRun(log, { prompt: "p" });
  const add = (payload: Parameters<EventLog["append"]>[0]["payload"]) =>
    log.append({ ...run, payload });
  await add({ case: "runStarted", value: create(RunStartedSchema, { workerId: "w" }) });
  await add({
    case: "toolCall",
    value: create(ToolCallSchema, { callId: "c1", tool: "repo.read" }),
  });
  await add({ case: "toolResult", value: create(ToolResultSchema, { callId: "c1", ok: true }) });
  return run;
}

/** Cuts the run's stored log back to its first `keep` events and opens the log again. */
async function rewind(runId: string, keep: number): Promise<void> {
  await current.close();
  const file = join(dir, "runs", `${runId}.ndjson`);
  const lines = readFileSync(file, "utf8").split("\n").filter(Boolean);
  writeFileSync(file, `${lines.slice(0, keep).join("\n")}\n`);
  current = await openFileEventLog({ dir });
}

const failed = (run: { runId: string; sessionId: string }) =>
  log.append({
    ...run,
    payload: { case: "runFailed", value: create(RunFailedSchema, { error: { code: "EX" } }) },
  });

describe("a cached run whose log was rewound", () => {
  it("head behind the entry: folded again to the stored head", async () => {
    const run = await fourEvents();
    const cache = new RunProjectionCache({ log });
    assert.equal((await cache.get(run.runId))?.lastSeq, 4n);
    await rewind(run.runId, 2);
    const r = await cache.get(run.runId);
    assert.equal(r?.lastSeq, 2n);
    assert.equal(r?.state, RunState.RUNNING);
  });

  it("the same seq with another hash: folded again", async () => {
    const run = await fourEvents();
    const cache = new RunProjectionCache({ log });
    assert.equal((await cache.get(run.runId))?.state, RunState.RUNNING);
    await rewind(run.runId, 3);
    await failed(run); // seq 4 again, another event
    const r = await cache.get(run.runId);
    assert.equal(r?.lastSeq, 4n);
    assert.equal(r?.state, RunState.FAILED);
  });

  it("a longer log that does not chain onto the entry: folded again", async () => {
    const run = await fourEvents();
    const cache = new RunProjectionCache({ log });
    assert.equal((await cache.get(run.runId))?.lastSeq, 4n);
    await rewind(run.runId, 2);
    await log.append({
      ...run,
      payload: {
        case: "toolCall",
        value: create(ToolCallSchema, { callId: "c9", tool: "repo.read" }),
      },
    });
    await log.append({
      ...run,
      payload: {
        case: "toolCall",
        value: create(ToolCallSchema, { callId: "c10", tool: "repo.read" }),
      },
    });
    await failed(run); // seq 5
    const r = await cache.get(run.runId);
    assert.equal(r?.lastSeq, 5n);
    assert.equal(r?.state, RunState.FAILED);
    assert.equal(r?.toolCallCount, 2n, "c9 and c10 counted, the lost c1 not");
  });

  it("an older head handed in while the entry is newer (no rewind): the entry stands", async () => {
    const run = await fourEvents();
    const cache = new RunProjectionCache({ log });
    const old = await log.head(run.runId);
    await failed(run);
    assert.equal((await cache.get(run.runId))?.state, RunState.FAILED);
    assert.ok(old !== undefined);
    assert.equal((await cache.get(run.runId, old))?.state, RunState.FAILED);
  });

  it("a reader whose own head read is overtaken by another reader's fold does not fold from the start again", async () => {
    const run = await fourEvents();
    let fromZero = 0;
    let gate: Promise<void> | undefined;
    const counted = new Proxy(log, {
      get(t, k) {
        if (k === "read")
          return (id: string, after: number, n?: number) => {
            if (after === 0) fromZero++;
            return t.read(id, after, n);
          };
        if (k === "head")
          return async (id: string) => {
            const h = await t.head(id);
            await gate; // this reader's head read is slow (a busy Redis)
            return h;
          };
        return Reflect.get(t, k);
      },
    });
    const cache = new RunProjectionCache({ log: counted });
    await cache.get(run.runId);
    assert.equal(fromZero, 1);
    let open: () => void = () => undefined;
    gate = new Promise((r) => {
      open = r;
    });
    const a = cache.get(run.runId); // reads the head (seq 4), then waits
    await failed(run); // seq 5
    const head = await log.head(run.runId);
    assert.ok(head !== undefined);
    assert.equal((await cache.get(run.runId, head))?.lastSeq, 5n); // another reader folds to 5
    gate = undefined;
    open();
    assert.equal((await a)?.lastSeq, 5n);
    assert.equal(fromZero, 1, "no rewind happened: the run is not folded from the start again");
  });
});
