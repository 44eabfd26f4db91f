/**
 * Attack (#28 review, deletion vs a live run's artifact write), on a real redis-server:
 *
 * A live run stores a blob (a patch, a snapshot, a summary: worker/drive-end.ts puts the
 * patch, THEN appends the `artifact.emitted` event naming it). Between the two, any other
 * run naming the same bytes is deleted — by its tenant (DeleteRun), an admin (PurgeTenant)
 * or the retention sweeper, which does so on its own every minute. The content store is
 * shared across tenants, so the other run may be anyone's.
 *
 * Why it gets through: lifecycle/delete-run.ts complete() → RedisRunDeletion.releaseArtifacts
 * counts only `artifact:refs:{digest}` (filled by the append script when an event names the
 * blob) and upload receipts; the live run's `put` took no reference, so the blob is
 * "unreferenced" and removed. The append script (eventlog/append-lua.ts) then adds the live
 * run's reference to a blob that no longer exists and acknowledges the event: the run's
 * event names a removed artifact (GetArtifact NOT_FOUND, the patch lost). Upload receipts
 * and inline CreateRun got a hold-and-recheck (api/hold-upload.ts); the worker's writes did not.
 *
 * Fixed: the worker's per-run store holds each blob it writes (held-artifact-store.ts); the
 * test stores through it as the drive does.
 * What must hold: a blob a live run has stored (its put answered) is never removed by
 * another run's deletion before or after that run's event names it ("a live run is never
 * touched"; "remove a blob another run references" never).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { ulid } from "ulid";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import type { EventPayload } from "../eventlog/event-codec.ts";
import { RedisEventLog } from "../eventlog/redis-event-log.ts";
import { ArtifactEmittedSchema, RunStartedSchema } from "../gen/agentd/v1/events_pb.js";
import { RedisArtifactLedger } from "../tenancy/redis-artifact-bytes.ts";
import { completed } from "../testing/deletion-fixtures.ts";
import { startRedis, type TestRedis } from "../testing/redis-server.ts";
import { deleteRun, type RunDeletionDeps } from "./delete-run.ts";
import { heldArtifactStore } from "./held-artifact-store.ts";
import { RedisRunDeletion } from "./redis-run-deletion.ts";

const emitted = (digest: string, size: number): EventPayload => ({
  case: "artifactEmitted",
  value: create(ArtifactEmittedSchema, {
    name: "patch.diff",
    digest,
    sizeBytes: BigInt(size),
    mediaType: "text/x-diff",
  }),
});
const started = (): EventPayload => ({ case: "runStarted", value: create(RunStartedSchema, {}) });

let redis: TestRedis;
let dir: string;
let log: RedisEventLog;
let artifacts: FsArtifactStore;
let deps: RunDeletionDeps;

before(async () => {
  redis = await startRedis();
  dir = mkdtempSync(join(tmpdir(), "attack3-live-blob-"));
  const client = redis.client();
  log = new RedisEventLog({ client, prefix: "agentd:" });
  artifacts = new FsArtifactStore(join(dir, "artifacts"));
  deps = {
    store: new RedisRunDeletion({ client, prefix: "agentd:" }),
    artifacts: [artifacts],
    tenantArtifacts: new RedisArtifactLedger({ client, prefix: "agentd:" }),
  };
});
after(async () => {
  await log?.close();
  await redis?.stop();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

describe("deletion vs a live run's artifact write", { timeout: 120_000 }, () => {
  it("another tenant's DeleteRun between a live run's put and its artifact.emitted does not remove the blob", async () => {
    // The same patch bytes (a common one-line fix) produced by two tenants' runs.
    const patch = Buffer.from(`--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-x\n+y ${ulid()}\n`);
    // Tenant "old": an ended run that emitted it (retention or its tenant deletes it later).
    const oldRun = ulid();
    const info = await artifacts.put(patch);
    await log.append({ runId: oldRun, sessionId: oldRun, tenantId: "old", payload: started() });
    await log.append({
      runId: oldRun,
      sessionId: oldRun,
      payload: emitted(info.digest, info.size),
    });
    await log.append({ runId: oldRun, sessionId: oldRun, payload: completed() });
    // Tenant "live": a running run; its drive has stored the patch (put answered)...
    const liveRun = ulid();
    await log.append({ runId: liveRun, sessionId: liveRun, tenantId: "live", payload: started() });
    // (the worker's per-run store: drive.ts withRunArtifacts).
    const mine = await heldArtifactStore(artifacts, deps.store.receipts, liveRun).put(patch);
    assert.equal(mine.digest, info.digest, "same bytes, same content address");
    // ...and before it appends artifact.emitted, the old run is deleted.
    await deleteRun(deps, { runId: oldRun, tenantId: "old", by: "old", reason: "cleanup" });
    await log.append({
      runId: liveRun,
      sessionId: liveRun,
      payload: emitted(mine.digest, mine.size),
    });
    const events = await log.read(liveRun, 0);
    assert.ok(
      events.some((e) => e.json.includes(mine.digest)),
      "the live run's event was acknowledged",
    );
    assert.notEqual(
      await artifacts.stat(mine.digest),
      undefined,
      `the live run's artifact.emitted names blob ${mine.digest}, which another tenant's DeleteRun removed`,
    );
  });
});
