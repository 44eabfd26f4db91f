/**
 * Upload receipts as artifact references, on both stores (the embedded log with its receipts
 * file, and a real redis-server): a live receipt of any tenant keeps a blob a deletion would
 * otherwise remove; its expiry releases it (blob and receipt blob go once nothing else names
 * them); the same tenant uploading twice keeps the later expiry; CreateRun's renewal extends
 * a live receipt and refuses an expired one; uploads racing deletions of the same content
 * never end with a held receipt on a removed blob; the embedded store keeps receipts across
 * a restart; a tenant's artifactBytes count holds a blob once and lets it go with the
 * tenant's last reference (a run or a receipt), whatever other tenants hold; a tenant purge
 * drops that tenant's receipts at once.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { ulid } from "ulid";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { receiptDigest, receiptOf } from "../artifacts/upload-receipt.ts";
import { AgentdError } from "../errors.ts";
import type { EventPayload } from "../eventlog/event-codec.ts";
import { openFileEventLog } from "../eventlog/file-event-log.ts";
import type { EventLog } from "../eventlog/port.ts";
import { RedisEventLog } from "../eventlog/redis-event-log.ts";
import { RunQueuedSchema } from "../gen/agentd/v1/events_pb.js";
import { MemoryArtifactLedger } from "../tenancy/memory-artifact-bytes.ts";
import { RedisArtifactLedger } from "../tenancy/redis-artifact-bytes.ts";
import { completed } from "../testing/deletion-fixtures.ts";
import { startRedis, type TestRedis } from "../testing/redis-server.ts";
import { deleteRun, type RunDeletionDeps } from "./delete-run.ts";
import { dropTenantReceipts, expireUploadReceipts } from "./expire-receipts.ts";
import { FileRunDeletion } from "./file-run-deletion.ts";
import { holdWorkspace } from "./hold-blob.ts";
import { RedisRunDeletion } from "./redis-run-deletion.ts";

interface Env {
  log: EventLog;
  deps: RunDeletionDeps;
  artifacts: FsArtifactStore;
  /** A second store over the same data (another server, or the embedded one restarted). */
  reopen?: () => Promise<RunDeletionDeps>;
  close(): Promise<void>;
}

const HOUR = 3_600_000;

/** An ended run of `tenantId` whose workspace is `content`. */
async function endedRun(env: Env, tenantId: string, content: Buffer): Promise<string> {
  const runId = ulid();
  const info = await env.artifacts.put(content);
  const payload: EventPayload = {
    case: "runQueued",
    value: create(RunQueuedSchema, {
      tenantId,
      prompt: "p",
      priority: 5,
      workspaceDigest: info.digest,
    }),
  };
  await env.log.append({ runId, sessionId: runId, tenantId, payload });
  await env.log.append({ runId, sessionId: runId, payload: completed() });
  return runId;
}

/** What UploadWorkspace does: the blob, the tenant's reference until `expiresAt`, the receipt blob. */
async function upload(env: Env, tenantId: string, content: Buffer, expiresAt: number) {
  const info = await env.artifacts.put(content);
  await holdWorkspace(
    env.deps.store.receipts,
    env.artifacts,
    tenantId,
    info.digest,
    expiresAt,
    "chunk",
  );
  await env.artifacts.put(receiptOf(tenantId, info.digest));
  return info.digest;
}

const has = async (env: Env, digest: string) => (await env.artifacts.stat(digest)) !== undefined;

function suite(name: string, open: () => Promise<Env>) {
  describe(name, { timeout: 120_000 }, () => {
    let env: Env;
    before(async () => {
      env = await open();
    });
    after(async () => {
      await env?.close();
    });

    it("another tenant's deletion leaves a receipted blob; the receipt's expiry removes it", async () => {
      const content = Buffer.from(`shared ${ulid()}`);
      const now = Date.now();
      const digest = await upload(env, "victim", content, now + HOUR);
      const runId = await endedRun(env, "attacker", content);
      const del = await deleteRun(env.deps, { runId, by: "attacker", reason: "r" });
      assert.equal(del.removedBlobs, 0, "the blob has a live receipt: nothing is removed");
      assert.ok(await has(env, digest), "the victim's uploaded workspace is still stored");
      assert.equal(await env.deps.store.receipts.renew("victim", digest, now, now), true);
      // Not expired yet: nothing goes.
      assert.deepEqual(await expireUploadReceipts(env.deps, now + HOUR - 1), {
        expired: 0,
        removedBlobs: 0,
      });
      const r = await expireUploadReceipts(env.deps, now + HOUR);
      assert.deepEqual(r, { expired: 1, removedBlobs: 1 });
      assert.equal(await has(env, digest), false, "the expired receipt was the last reference");
      assert.equal(await has(env, receiptDigest("victim", digest)), false, "its receipt blob went");
      assert.equal(await env.deps.store.receipts.renew("victim", digest, now, now), false);
      assert.equal(await env.deps.store.receipts.removing(digest), false, "no mark left behind");
    });

    it("an expired receipt leaves a blob a run still names", async () => {
      const content = Buffer.from(`run-held ${ulid()}`);
      const now = Date.now();
      const digest = await upload(env, "a", content, now + 1000);
      const runId = await endedRun(env, "b", content);
      assert.deepEqual(await expireUploadReceipts(env.deps, now + 1000), {
        expired: 1,
        removedBlobs: 0,
      });
      assert.ok(await has(env, digest), "the run's events still name it");
      assert.equal(await has(env, receiptDigest("a", digest)), false, "the receipt blob went");
      const del = await deleteRun(env.deps, { runId, by: "b", reason: "r" });
      assert.equal(del.removedBlobs, 1, "the run was the last reference");
      assert.equal(await has(env, digest), false);
    });

    it("the same tenant uploading twice keeps the later expiry; renew extends, never shortens", async () => {
      const content = Buffer.from(`twice ${ulid()}`);
      const now = Date.now();
      const digest = await upload(env, "t", content, now + 2 * HOUR);
      await upload(env, "t", content, now + HOUR); // an earlier expiry does not shorten it
      const receipts = env.deps.store.receipts;
      assert.equal(await receipts.renew("t", digest, now + HOUR + 1, now), true);
      assert.equal(await receipts.renew("t", digest, now, now + 3 * HOUR), true, "extended");
      assert.equal((await expireUploadReceipts(env.deps, now + 2 * HOUR)).expired, 0);
      assert.equal(await receipts.renew("other", digest, now, now), false, "a tenant's own only");
      const r = await expireUploadReceipts(env.deps, now + 3 * HOUR);
      assert.deepEqual(r, { expired: 1, removedBlobs: 1 });
    });

    it("uploads racing another tenant's deletions of the same content: a held receipt always has its blob", async () => {
      const n = 12;
      const contents = Array.from({ length: n }, (_, i) => Buffer.from(`race ${i} ${ulid()}`));
      const runs = await Promise.all(contents.map((c) => endedRun(env, "deleter", c)));
      const exp = Date.now() + HOUR;
      const outcomes = await Promise.all(
        contents.map(async (c, i) => {
          const [up] = await Promise.allSettled([
            upload(env, "uploader", c, exp),
            deleteRun(env.deps, { runId: runs[i] as string, by: "deleter", reason: "r" }),
          ]);
          return up;
        }),
      );
      let held = 0;
      for (const [i, up] of outcomes.entries()) {
        if (up.status === "fulfilled") {
          held++;
          assert.ok(
            await has(env, up.value),
            `upload ${i} answered a digest whose blob was removed`,
          );
        } else {
          assert.ok(
            up.reason instanceof AgentdError && up.reason.code === "ECONFLICT",
            String(up.reason),
          );
        }
      }
      assert.ok(held > 0, "at least one upload held its blob");
      for (const c of contents)
        assert.equal(await env.deps.store.receipts.removing(digestOf(c)), false, "marks cleared");
    });

    it("a tenant purge drops that tenant's receipts now, blobs and counts included; a tenant whose name ends the same keeps its own", async () => {
      const ledger = env.deps.tenantArtifacts;
      assert.ok(ledger !== undefined);
      const mine = Buffer.from(`purged ${ulid()}`.padEnd(300, "."));
      const shared = Buffer.from(`shared-purge ${ulid()}`);
      const now = Date.now();
      const d1 = await upload(env, "pa", mine, now + HOUR);
      const d2 = await upload(env, "pa", shared, now + HOUR);
      await upload(env, "xpa", shared, now + HOUR); // "xpa" ends in "pa": not the same tenant
      await ledger.charge("pa", d1, mine.length);
      assert.deepEqual((await env.deps.store.receipts.tenantDigests("pa")).sort(), [d1, d2].sort());
      assert.equal(await dropTenantReceipts(env.deps, "pa"), 2);
      assert.equal(await has(env, d1), false, "the purged tenant's only reference went");
      assert.equal(await has(env, receiptDigest("pa", d1)), false, "its receipt blob went");
      assert.equal(await ledger.bytesOf("pa"), 0, "its artifactBytes let go");
      assert.ok(await has(env, d2), "another tenant's live receipt keeps the shared blob");
      assert.equal(await env.deps.store.receipts.renew("xpa", d2, now, now), true);
      assert.equal(await env.deps.store.receipts.renew("pa", d2, now, now), false);
      assert.deepEqual(await env.deps.store.receipts.tenantDigests("pa"), []);
      assert.equal(await env.deps.store.receipts.removing(d1), false, "no mark left behind");
    });

    it("artifactBytes: a blob counts once per tenant; it leaves a tenant's count with that tenant's last reference", async () => {
      const ledger = env.deps.tenantArtifacts;
      assert.ok(ledger !== undefined);
      const content = Buffer.from(`counted ${ulid()}`.padEnd(500, "."));
      const d = digestOf(content);
      const [a1, a2] = [await endedRun(env, "ta", content), await endedRun(env, "ta", content)];
      const b1 = await endedRun(env, "tb", content);
      // What the worker's store does per write: charge the run's tenant.
      for (const t of ["ta", "ta", "tb"]) await ledger.charge(t, d, content.length);
      assert.equal(await ledger.bytesOf("ta"), 500, "two runs of one tenant: counted once");
      assert.equal(await ledger.bytesOf("tb"), 500, "and once for the other tenant");
      await deleteRun(env.deps, { runId: a1, by: "ta", reason: "r" });
      assert.equal(await ledger.bytesOf("ta"), 500, "ta's other run still names it");
      const now = Date.now();
      await upload(env, "ta", content, now + HOUR);
      await deleteRun(env.deps, { runId: a2, by: "ta", reason: "r" });
      assert.equal(await ledger.bytesOf("ta"), 500, "ta's live receipt still holds it");
      await expireUploadReceipts(env.deps, now + HOUR);
      assert.equal(await ledger.bytesOf("ta"), 0, "ta's last reference went");
      assert.equal(await ledger.bytesOf("tb"), 500, "tb's count is its own");
      assert.ok(await has(env, d), "tb's run still names the blob");
      await deleteRun(env.deps, { runId: b1, by: "tb", reason: "r" });
      assert.equal(await ledger.bytesOf("tb"), 0);
      assert.equal(await has(env, d), false);
    });

    it("a second store over the same data sees the receipts", async () => {
      if (env.reopen === undefined) return;
      const content = Buffer.from(`restart ${ulid()}`);
      const now = Date.now();
      const digest = await upload(env, "r", content, now + HOUR);
      const other = await env.reopen();
      assert.equal(await other.store.receipts.renew("r", digest, now, now), true);
      const runId = await endedRun(env, "s", content);
      await deleteRun(other, { runId, by: "s", reason: "r" });
      assert.ok(await has(env, digest), "the receipt written before counts for the other store");
    });
  });
}

const digestOf = (b: Buffer) => createHash("sha256").update(b).digest("hex");

suite("embedded log", async () => {
  const dir = mkdtempSync(join(tmpdir(), "receipts-file-"));
  const log = await openFileEventLog({ dir: join(dir, "log") });
  const artifacts = new FsArtifactStore(join(dir, "artifacts"));
  const receiptsPath = join(dir, "upload-receipts.json");
  const store = new FileRunDeletion({ log, receiptsPath });
  return {
    log,
    artifacts,
    deps: { store, artifacts: [artifacts], tenantArtifacts: new MemoryArtifactLedger() },
    reopen: async () => ({
      store: new FileRunDeletion({ log, receiptsPath }),
      artifacts: [artifacts],
    }),
    close: async () => {
      await log.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

let redis: TestRedis | undefined;
suite("redis", async () => {
  redis = await startRedis();
  const dir = mkdtempSync(join(tmpdir(), "receipts-redis-"));
  const client = redis.client();
  const log = new RedisEventLog({ client, prefix: "agentd:" });
  const artifacts = new FsArtifactStore(join(dir, "artifacts"));
  const store = new RedisRunDeletion({ client, prefix: "agentd:" });
  return {
    log,
    artifacts,
    deps: {
      store,
      artifacts: [artifacts],
      tenantArtifacts: new RedisArtifactLedger({ client, prefix: "agentd:" }),
    },
    reopen: async () => ({
      store: new RedisRunDeletion({ client: redis?.client() ?? client, prefix: "agentd:" }),
      artifacts: [artifacts],
    }),
    close: async () => {
      await log.close();
      await redis?.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
