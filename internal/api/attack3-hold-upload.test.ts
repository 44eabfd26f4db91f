/**
 * Attack (#28 review, upload receipts vs deletions of the same content), on a real
 * redis-server with the real deletion and receipt stores:
 *
 * UploadWorkspace (and an inline CreateRun) first stores the archive (content-addressed: the
 * blob may already exist, named by another tenant's ended run), THEN takes its reference
 * with holdWorkspace (api/hold-upload.ts). holdWorkspace checks the blob is still there only
 * when a deletion's "removing" mark is set at the moment of the hold. A deletion that ran
 * completely between the store and the hold — found the blob unreferenced, removed it,
 * cleared its mark (lifecycle/delete-run.ts complete → receipts.removed) — leaves no mark:
 * `hold` answers false and holdWorkspace returns at once. UploadWorkspace then answers the
 * digest as stored, with a live receipt on a blob that no longer exists; the tenant's
 * CreateRun with it is NOT_FOUND ("upload it first") — the upload was silently lost.
 *
 * What must hold (hold-upload.ts's own "Must never: answer success for a blob a deletion
 * removed"): after holdWorkspace returns, the blob is stored; otherwise it throws ECONFLICT.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { ulid } from "ulid";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { AgentdError } from "../errors.ts";
import { RedisEventLog } from "../eventlog/redis-event-log.ts";
import { RunQueuedSchema } from "../gen/agentd/v1/events_pb.js";
import { deleteRun, type RunDeletionDeps } from "../lifecycle/delete-run.ts";
import { holdWorkspace } from "../lifecycle/hold-blob.ts";
import { RedisRunDeletion } from "../lifecycle/redis-run-deletion.ts";
import { completed } from "../testing/deletion-fixtures.ts";
import { startRedis, type TestRedis } from "../testing/redis-server.ts";

let redis: TestRedis;
let dir: string;
let log: RedisEventLog;
let artifacts: FsArtifactStore;
let deps: RunDeletionDeps;

before(async () => {
  redis = await startRedis();
  dir = mkdtempSync(join(tmpdir(), "attack3-hold-upload-"));
  const client = redis.client();
  log = new RedisEventLog({ client, prefix: "agentd:" });
  artifacts = new FsArtifactStore(join(dir, "artifacts"));
  deps = { store: new RedisRunDeletion({ client, prefix: "agentd:" }), artifacts: [artifacts] };
});
after(async () => {
  await log?.close();
  await redis?.stop();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

describe("holdWorkspace after a deletion of the same content", { timeout: 120_000 }, () => {
  it("a deletion that finished between the upload's store and its hold: the hold fails or the blob is there", async () => {
    // The same repository snapshot: another tenant's ended run names it.
    const content = Buffer.from(`public repo ${ulid()}`);
    const other = ulid();
    const stored = await artifacts.put(content);
    await log.append({
      runId: other,
      sessionId: other,
      tenantId: "other",
      payload: {
        case: "runQueued",
        value: create(RunQueuedSchema, {
          tenantId: "other",
          prompt: "p",
          priority: 5,
          workspaceDigest: stored.digest,
        }),
      },
    });
    await log.append({ runId: other, sessionId: other, payload: completed() });
    // The victim's UploadWorkspace stores the archive (same bytes: the blob is there)...
    const mine = await artifacts.put(content);
    assert.equal(mine.digest, stored.digest);
    // ...the other tenant's DeleteRun runs to its end (its removing mark is cleared)...
    const del = await deleteRun(deps, { runId: other, by: "other", reason: "cleanup" });
    assert.equal(del.removedBlobs, 1, "the blob was unreferenced when the deletion looked");
    // ...then the victim's hold.
    const outcome = await holdWorkspace(
      deps.store.receipts,
      artifacts,
      "victim",
      mine.digest,
      Date.now() + 3_600_000,
      "chunk",
    ).then(
      () => "held",
      (e: unknown) => (e instanceof AgentdError ? e.code : String(e)),
    );
    if (outcome === "ECONFLICT") return; // refused: the client uploads again
    assert.equal(outcome, "held");
    assert.notEqual(
      await artifacts.stat(mine.digest),
      undefined,
      "holdWorkspace answered success with a live receipt on a blob the deletion had removed",
    );
  });
});
