/**
 * The retention sweeper on the embedded log (`agentd dev`): a real FileEventLog on disk and
 * the real embedded-log deletion: ended runs past retention go (files included), live runs
 * and runs within retention stay, and a run claimed once is not claimed again at once.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { ulid } from "ulid";
import { queued } from "../eventlog/conformance.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { RunCompletedSchema } from "../gen/agentd/v1/events_pb.js";
import { FileRunDeletion } from "../lifecycle/file-run-deletion.ts";
import { createLogger } from "../telemetry/logger.ts";
import { deleteForRetention } from "./delete-for-retention.ts";
import { FileEndedRunIndex } from "./file-ended-index.ts";
import { createRetentionSweeper } from "./sweeper.ts";

const dir = mkdtempSync(join(tmpdir(), "agentd-retention-file-"));
after(() => rmSync(dir, { recursive: true, force: true }));

async function run(log: FileEventLog, tenant: string, end: boolean): Promise<string> {
  const runId = ulid();
  await log.append(queued(runId, tenant));
  if (end)
    await log.append({
      runId,
      sessionId: "s1",
      payload: { case: "runCompleted", value: create(RunCompletedSchema, { summary: "ok" }) },
    });
  return runId;
}

it("deletes the embedded log's ended runs past retention, files included; keeps the rest", async () => {
  const log = await openFileEventLog({ dir, fsync: false });
  try {
    const due = [await run(log, "acme", true), await run(log, "acme", true)];
    const kept = await run(log, "keep", true);
    assert.ok(
      readdirSync(join(dir, "runs")).includes(`${due[0]}.ndjson`),
      "the files are there first",
    );
    const live = await run(log, "acme", false);
    let now = Date.now() + 10_000; // 10 s after the runs ended
    const index = new FileEndedRunIndex(log, () => now);
    const sweeper = createRetentionSweeper({
      index,
      deleteRun: deleteForRetention({ store: new FileRunDeletion({ log }), artifacts: [] }),
      retentionOf: (t) => (t === "keep" ? 3_600_000 : 5_000),
      serverRetentionMs: 5_000,
      logger: createLogger({ level: "silent", name: "t" }),
    });
    const r = await sweeper.tick();
    assert.equal(r.errors, 0);
    assert.equal(r.deleted, 2, JSON.stringify(r));
    for (const id of due) {
      assert.equal(await log.head(id), undefined);
      const files = readdirSync(join(dir, "runs")).filter((f) => f.startsWith(id));
      assert.ok(
        files.every((f) => f.includes("deleted") || f.includes("tomb")),
        files.join(),
      );
    }
    assert.equal((await log.head(kept))?.ended, "run.completed");
    assert.equal((await log.head(live))?.seq, 1);
    now += 60_000;
    assert.equal((await sweeper.tick()).deleted, 0, "nothing else is due: 1 h, and live");
  } finally {
    await log.close();
  }
});
