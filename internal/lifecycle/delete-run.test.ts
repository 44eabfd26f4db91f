/**
 * The deletion primitive on both stores (the embedded log and a real redis-server): the
 * beforeDelete hook runs once, with the run still whole, and a hook that throws removes
 * nothing; a live run never reaches the hook; a finishing call does not run it again; a
 * blob another run names stays; a deleted run takes no append.
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
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import type { EventLog } from "../eventlog/port.ts";
import { RedisEventLog } from "../eventlog/redis-event-log.ts";
import { ArtifactEmittedSchema, RunQueuedSchema } from "../gen/agentd/v1/events_pb.js";
import { FileIdempotencyStore } from "../idempotency/file-idempotency.ts";
import { RedisIdempotencyStore } from "../idempotency/redis-idempotency.ts";
import { completed } from "../testing/deletion-fixtures.ts";
import { startRedis, type TestRedis } from "../testing/redis-server.ts";
import { deleteRun, type RunDeletionDeps } from "./delete-run.ts";
import { FileRunDeletion } from "./file-run-deletion.ts";
import { RedisRunDeletion } from "./redis-run-deletion.ts";

interface Env {
  log: EventLog;
  deps: RunDeletionDeps;
  artifacts: FsArtifactStore;
}

const queued = (tenantId: string, workspaceDigest: string): EventPayload => ({
  case: "runQueued",
  value: create(RunQueuedSchema, { tenantId, prompt: "secret", priority: 5, workspaceDigest }),
});

async function endedRun(
  env: Env,
  blob: string,
  ends = true,
): Promise<{ runId: string; digest: string }> {
  const runId = ulid();
  const info = await env.artifacts.put(Buffer.from(blob));
  await env.log.append({
    runId,
    sessionId: runId,
    tenantId: "t1",
    payload: queued("t1", info.digest),
  });
  const art: EventPayload = {
    case: "artifactEmitted",
    value: create(ArtifactEmittedSchema, {
      name: "patch",
      digest: info.digest,
      sizeBytes: BigInt(info.size),
    }),
  };
  await env.log.append({ runId, sessionId: runId, payload: art });
  if (ends) await env.log.append({ runId, sessionId: runId, payload: completed() });
  return { runId, digest: info.digest };
}

function suite(name: string, open: () => Promise<Env & { close(): Promise<void> }>) {
  describe(name, () => {
    let env: Env & { close(): Promise<void> };
    before(async () => {
      env = await open();
    });
    after(async () => {
      await env?.close();
    });

    it("the hook runs once with the run whole; a throwing hook removes nothing", async () => {
      const { runId, digest } = await endedRun(env, `blob ${ulid()}`);
      await assert.rejects(
        deleteRun(
          env.deps,
          { runId, by: "t", reason: "r" },
          {
            beforeDelete: async () => {
              throw new Error("archive full");
            },
          },
        ),
        /archive full/,
      );
      assert.ok(await env.log.head(runId), "still there");
      assert.ok(await env.artifacts.stat(digest), "its blob too");
      const seen: string[] = [];
      const res = await deleteRun(
        env.deps,
        { runId, by: "t", reason: "r" },
        {
          beforeDelete: async (tenant, id) => {
            // Whole and readable while the hook runs.
            assert.equal((await env.log.read(id, 0)).length, 3);
            assert.ok(await env.artifacts.stat(digest));
            seen.push(`${tenant}/${id}`);
          },
        },
      );
      assert.deepEqual(seen, [`t1/${runId}`]);
      assert.equal(res.began, true);
      assert.equal(res.removedBlobs, 1);
      assert.equal(await env.log.head(runId), undefined);
      assert.equal(await env.artifacts.stat(digest), undefined);
      const again = await deleteRun(
        env.deps,
        { runId, by: "t", reason: "r" },
        {
          beforeDelete: async () => {
            seen.push("again");
          },
        },
      );
      assert.equal(again.began, false);
      assert.deepEqual(seen, [`t1/${runId}`], "not called for a run already deleted");
      await assert.rejects(
        env.log.append({ runId, sessionId: runId, tenantId: "t1", payload: completed() }),
        /was deleted/,
      );
    });

    it("a live run never reaches the hook; another tenant's is not found; a shared blob stays", async () => {
      const live = await endedRun(env, `live ${ulid()}`, false);
      let called = false;
      const hook = {
        beforeDelete: async () => {
          called = true;
        },
      };
      await assert.rejects(
        deleteRun(env.deps, { runId: live.runId, by: "t", reason: "r" }, hook),
        (e: Error & { code?: string }) =>
          e.code === "ECONFLICT" && /cancel it first/.test(e.message),
      );
      assert.equal(called, false);
      const blob = `shared ${ulid()}`;
      const a = await endedRun(env, blob);
      const b = await endedRun(env, blob);
      await assert.rejects(
        deleteRun(env.deps, { runId: a.runId, tenantId: "t2", by: "t", reason: "r" }),
        (e: Error & { code?: string }) => e.code === "ENOTFOUND",
      );
      const res = await deleteRun(env.deps, {
        runId: a.runId,
        tenantId: "t1",
        by: "t",
        reason: "r",
      });
      assert.equal(res.removedBlobs, 0);
      assert.ok(await env.artifacts.stat(a.digest), "B still names it");
      assert.equal(
        (await deleteRun(env.deps, { runId: b.runId, by: "t", reason: "r" })).removedBlobs,
        1,
      );
      assert.equal(await env.artifacts.stat(a.digest), undefined);
    });
  });
}

suite("embedded log", async () => {
  const dir = mkdtempSync(join(tmpdir(), "lifecycle-file-"));
  const log: FileEventLog = await openFileEventLog({ dir: join(dir, "log") });
  const artifacts = new FsArtifactStore(join(dir, "artifacts"));
  const store = new FileRunDeletion({ log, idempotency: new FileIdempotencyStore() });
  return {
    log,
    artifacts,
    deps: { store, artifacts: [artifacts] },
    close: async () => {
      await log.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

let redis: TestRedis | undefined;
suite("redis", async () => {
  redis = await startRedis();
  const dir = mkdtempSync(join(tmpdir(), "lifecycle-redis-"));
  const client = redis.client();
  const log = new RedisEventLog({ client, prefix: "agentd:" });
  const artifacts = new FsArtifactStore(join(dir, "artifacts"));
  const idempotency = new RedisIdempotencyStore({ client, prefix: "agentd:" });
  const store = new RedisRunDeletion({ client, prefix: "agentd:", idempotency });
  return {
    log,
    artifacts,
    deps: { store, artifacts: [artifacts] },
    close: async () => {
      await log.close();
      await redis?.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
