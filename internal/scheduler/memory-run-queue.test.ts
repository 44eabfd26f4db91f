import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { ulid } from "ulid";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { runRunQueueConformance } from "./conformance.ts";
import { MemoryRunQueue } from "./memory-run-queue.ts";
import type { SchedulerOptions } from "./options.ts";

// `agentd dev` wiring: the embedded event log holds the epochs.
const dir = mkdtempSync(join(tmpdir(), "agentd-memqueue-"));
let log: FileEventLog | undefined;
let last: MemoryRunQueue | undefined;

runRunQueueConformance("memory", {
  async open(opts: SchedulerOptions) {
    log ??= await openFileEventLog({ dir });
    last = new MemoryRunQueue({ ...opts, log });
    return { queue: last, log };
  },
  async more(n) {
    // One process: every worker shares the one queue object.
    return Array.from({ length: n }, () => last as MemoryRunQueue);
  },
  async cleanup() {
    await log?.close();
    rmSync(dir, { recursive: true, force: true });
  },
});

it("restorePaused: a run found paused at start holds its session until enqueue resumes it", async () => {
  const own = mkdtempSync(join(tmpdir(), "agentd-memqueue-restore-"));
  const ownLog = await openFileEventLog({ dir: own });
  const q = new MemoryRunQueue({ log: ownLog, leaseTtlMs: 5000, agingMs: 60_000, tenantLimit: 5 });
  const [P, N] = [ulid(), ulid()];
  await q.restorePaused({ runId: P, tenantId: "t", sessionId: "S", priority: 5 });
  await q.restorePaused({ runId: P, tenantId: "t", sessionId: "S", priority: 5 }); // no-op
  await q.enqueue({ runId: N, tenantId: "t", sessionId: "S", priority: 5 });
  assert.deepEqual(await q.pausedRuns(10), [P]);
  assert.equal(await q.stateOf(P), "paused");
  assert.equal(await q.claim("w", { blockMs: 0 }), undefined, "the session waits for 01P");
  assert.equal(
    (await q.enqueue({ runId: P, tenantId: "t", sessionId: "S", priority: 5 })).outcome,
    "resumed",
  );
  const c = await q.claim("w", { blockMs: 0 });
  assert.equal(c?.runId, P);
  assert.equal(c?.reason, "resumed");
  assert.deepEqual(await q.pausedRuns(10), []);
  if (c) await q.release(c, { outcome: "terminal" });
  assert.equal((await q.claim("w", { blockMs: 0 }))?.runId, N);
  await q.close();
  await ownLog.close();
  rmSync(own, { recursive: true, force: true });
});
