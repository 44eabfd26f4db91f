/**
 * DeleteRun and PurgeTenant against a real `agentd server` on a private redis-server, the
 * worker played by the test through the real queue (claims, fenced appends, releases):
 * everything a run owns is gone afterwards (a SCAN of Redis, a walk of the artifact
 * directory), a blob another run references stays, the run is NOT_FOUND everywhere, its
 * idempotency key cannot bring it back, the tenant feed says who deleted it and why; live
 * runs are refused naming their state; tenancy, roles and hostile input; two deletions at
 * once, ResolveApproval and a takeover racing one, a server SIGKILLed half way.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import type { Redis } from "ioredis";
import { ulid } from "ulid";
import { RedisEventLog } from "../eventlog/redis-event-log.ts";
import { ApprovalDecision, type Event, OutputDeltaSchema } from "../gen/agentd/v1/events_pb.js";
import { type Run, RunService } from "../gen/agentd/v1/run_service_pb.js";
import { sampleChange } from "../policychanges/conformance.ts";
import { RedisPolicyChangeStore } from "../policychanges/redis-store.ts";
import { type AgentdProcess, startAgentd, writeAuthFile } from "../testing/agentd-process.ts";
import {
  assertStreamGone,
  completed,
  emitted,
  filesUnder,
  mentioning,
  type PlayedWorker,
  playWorker,
  redisDump,
  started,
} from "../testing/deletion-fixtures.ts";
import { assertGrpcError, GrpcRunClient, grpc } from "../testing/grpc-run-client.ts";
import { startRedis, type TestRedis } from "../testing/redis-server.ts";
import { tarOf } from "../testing/tar.ts";

const salt = Math.random().toString(36).slice(2);
const T = {
  acme: `acme-${salt}-submit`,
  acmeReader: `acme-${salt}-read`,
  globex: `globex-${salt}-submit`,
  ops: `ops-${salt}-admin`,
};

let dir: string;
let redis: TestRedis;
let server: AgentdProcess;
let flags: string[];
let client: GrpcRunClient;
let r: Redis;
let log: RedisEventLog;
let worker: PlayedWorker;
let artifactDir: string;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-delete-"));
  artifactDir = join(dir, "artifacts");
  const authFile = writeAuthFile(dir, [
    { token: T.acme, tenant: "acme", roles: ["submit", "read", "approve"] },
    { token: T.acmeReader, tenant: "acme", roles: ["read"] },
    { token: T.globex, tenant: "globex", roles: ["submit", "read", "approve"] },
    { token: T.ops, tenant: "ops", roles: ["admin"] },
  ]);
  redis = await startRedis();
  flags = ["--event-log", redis.url, "--auth-file", authFile, "--artifact-dir", artifactDir];
  server = await startAgentd("server", flags);
  client = new GrpcRunClient(server.addr, T.acme);
  r = redis.client();
  log = new RedisEventLog({ client: redis.client(), prefix: "agentd:" });
  worker = playWorker(redis.client(), log);
});

after(async () => {
  client?.close();
  await worker?.close();
  await log?.close();
  await server?.stop("SIGKILL");
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const del = (runId: string, reason = "test cleanup", auth?: string | null) =>
  client
    .unary(RunService.method.deleteRun, { runId, reason }, auth)
    .catch((e: grpc.ServiceError) => {
      // grpc-js leaves the grpc-message percent-encoding in `details`.
      e.details = decodeURIComponent(e.details);
      throw e;
    });

async function newRun(
  opts: { key?: string; files?: { name: string; data: string }[]; token?: string } = {},
): Promise<Run> {
  const workspaceTar = await tarOf(opts.files ?? [{ name: "a.txt", data: "a\n" }]);
  const { run } = await client.createRun(
    { prompt: `the secret prompt ${ulid()}`, workspaceTar, idempotencyKey: opts.key ?? "" },
    opts.token,
  );
  assert.ok(run !== undefined);
  return run;
}

/** The tenant feed from now on, as WatchEvents serves it. */
function watch(token = T.acme) {
  const events: Event[] = [];
  const call = client.serverStream(RunService.method.watchEvents, {}, token);
  call.on("data", (m: { event?: Event }) => m.event && events.push(m.event));
  call.on("error", () => undefined);
  return { events, cancel: () => call.cancel() };
}

async function until<V>(what: string, probe: () => Promise<V | undefined>, ms = 60_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((res) => setTimeout(res, 50));
  }
}

describe("DeleteRun", { timeout: 240_000 }, () => {
  it("removes everything the run owns and nothing another run needs; NOT_FOUND everywhere after", async () => {
    const feed = watch();
    // Two runs on the same workspace and the same patch; A also has a snapshot of its own.
    const files = [{ name: "a.txt", data: `shared ${ulid()}\n` }];
    const a = await newRun({ key: `key-${ulid()}`, files });
    const b = await newRun({ files });
    assert.equal(a.workspaceDigest, b.workspaceDigest, "the workspace blob is shared");
    const snap = await emitted(artifactDir, "workspace-snapshot", `snapshot of A ${ulid()}`);
    const patch = await emitted(artifactDir, "patch", `shared patch ${ulid()}`);
    await worker.finish(a.runId, [snap.payload, patch.payload]);
    await worker.finish(b.runId, [patch.payload]);
    // A's name key, as the log stores it when a secret call first makes a name (runNameKey).
    await r.set(`agentd:run:${a.runId}:namekey`, "ab".repeat(32), "NX");
    const before = await redisDump(r);
    assert.ok(mentioning(before, a.runId).length >= 5, "the run is in Redis before");
    const blobsBefore = filesUnder(artifactDir);
    assert.ok(blobsBefore.some((f) => f.endsWith(snap.digest)));

    const res = await del(a.runId, "customer asked (ticket 42)");
    assert.equal(res.runId, a.runId);
    assert.equal(res.tenantId, "acme");
    assert.equal(res.deletedNow, true);
    assert.equal(res.artifactsRemoved, 1n, "only the snapshot: workspace and patch are B's too");

    // Redis: only the tombstone and the run.deleted notice in the feed name the run.
    const dump = await redisDump(r);
    assert.deepEqual(mentioning(dump, a.runId).sort(), [
      "agentd:feed",
      `agentd:run:${a.runId}:deleted`,
    ]);
    const feedEntries = (await r.xrange("agentd:feed", "-", "+")).filter(([, f]) =>
      f.includes(a.runId),
    );
    assert.equal(feedEntries.length, 1, "one feed entry names it: the notice");
    const notice = JSON.parse(feedEntries[0]?.[1][9] ?? "{}");
    assert.equal(notice.type, "run.deleted");
    assert.equal(notice.runDeleted.reason, "customer asked (ticket 42)");
    assert.equal(notice.runDeleted.deletedBy.length > 0, true);
    assert.ok(!(feedEntries[0]?.[1].join(" ") ?? "").includes("secret prompt"));
    const idem = [...dump].filter(([k]) => /^agentd:idem:[0-9a-f]{64}$/.test(k));
    assert.ok(
      idem.some(([, v]) => v.includes('"deleted":true')),
      "the idempotency key is a deleted marker",
    );
    assert.ok(dump.has(`agentd:run:${b.runId}:events`), "B is untouched");
    // Artifacts: A's snapshot is gone; the shared workspace and patch stay for B.
    const blobs = filesUnder(artifactDir);
    assert.ok(!blobs.some((f) => f.endsWith(snap.digest)), "the snapshot blob is gone");
    assert.ok(
      blobs.some((f) => f.endsWith(patch.digest)),
      "the shared patch stays",
    );
    assert.ok(
      blobs.some((f) => f.endsWith(a.workspaceDigest)),
      "the shared workspace stays",
    );

    // NOT_FOUND everywhere, and the key cannot bring the run back.
    await assertGrpcError(client.getRun(a.runId), grpc.status.NOT_FOUND);
    const s = client.streamEvents({ runId: a.runId });
    assert.equal((await s.end(30_000)).status.code, grpc.status.NOT_FOUND);
    const art = client.serverStream(RunService.method.getArtifact, {
      runId: a.runId,
      digest: snap.digest,
    });
    const artEnd = await new Promise<grpc.StatusObject>((res) => {
      art.on("data", () => undefined);
      art.on("error", () => undefined);
      art.on("status", res);
    });
    assert.equal(artEnd.code, grpc.status.NOT_FOUND, "a deleted run's artifact by id");
    const listed = await client.listRuns({ pageSize: 100 });
    assert.ok(!listed.runs.some((x) => x.runId === a.runId), "not in ListRuns");
    assert.ok(listed.runs.some((x) => x.runId === b.runId));
    assert.equal(await r.exists(`agentd:idem:run:${a.runId}`), 0, "the key's pointer is gone");

    // The tenant feed told the watcher who and why, and nothing of the run's content.
    const seen = await until("run.deleted in WatchEvents", async () =>
      feed.events.find((e) => e.type === "run.deleted" && e.runId === a.runId),
    );
    assert.equal(seen.payload.case, "runDeleted");
    if (seen.payload.case === "runDeleted") {
      assert.equal(seen.payload.value.reason, "customer asked (ticket 42)");
      assert.equal(seen.payload.value.ended, "run.completed");
    }
    feed.cancel();

    // Again: nothing left to do, still OK.
    const again = await del(a.runId);
    assert.equal(again.deletedNow, false);
    // B deleted too: now the shared blobs and the tenant's upload receipt go.
    const resB = await del(b.runId);
    assert.equal(resB.artifactsRemoved, 2n, "the workspace and the patch");
    const left = filesUnder(artifactDir);
    assert.ok(!left.some((f) => f.endsWith(a.workspaceDigest) || f.endsWith(patch.digest)));
  });

  it("an idempotency key of a deleted run answers NOT_FOUND, never a new run", async () => {
    const key = `key-${ulid()}`;
    const files = [{ name: "k.txt", data: `${ulid()}\n` }];
    const workspaceTar = await tarOf(files);
    const { run } = await client.createRun({ prompt: "p", workspaceTar, idempotencyKey: key });
    assert.ok(run);
    await worker.finish(run.runId);
    await del(run.runId);
    const err = await client.createRun({ prompt: "p", workspaceTar, idempotencyKey: key }).then(
      () => undefined,
      (e: grpc.ServiceError) => e,
    );
    assert.equal(err?.code, grpc.status.NOT_FOUND);
    assert.match(err?.details ?? "", /idempotency_key.*deleted/);
    await assertGrpcError(client.getRun(run.runId), grpc.status.NOT_FOUND);
  });

  it("live runs are refused naming their state: queued, paused for an approval, running, held by a worker", async () => {
    const queued = await newRun();
    const e1 = await del(queued.runId).then(
      () => undefined,
      (e: grpc.ServiceError) => e,
    );
    assert.equal(e1?.code, grpc.status.FAILED_PRECONDITION);
    assert.match(e1?.details ?? "", /is queued: .*cancel it first/);
    await worker.pause(queued.runId);
    const e2 = await del(queued.runId).then(
      () => undefined,
      (e: grpc.ServiceError) => e,
    );
    assert.equal(e2?.code, grpc.status.FAILED_PRECONDITION);
    assert.match(e2?.details ?? "", /paused \(waiting for an approval\).*cancel it first/);

    const running = await newRun();
    const c = await worker.claim(running.runId);
    await worker.append(c, [started(c.lease.epoch)]);
    const e3 = await del(running.runId).then(
      () => undefined,
      (e: grpc.ServiceError) => e,
    );
    assert.match(e3?.details ?? "", /is running/);
    // Ended, but its worker has not let go yet (it holds the lease).
    await worker.append(c, [completed()]);
    const e4 = await del(running.runId).then(
      () => undefined,
      (e: grpc.ServiceError) => e,
    );
    assert.equal(e4?.code, grpc.status.FAILED_PRECONDITION);
    assert.match(e4?.details ?? "", /held by worker test-worker/);
    await worker.queue.release(c, { outcome: "terminal" });
    assert.equal((await del(running.runId)).deletedNow, true);
    // The refused ones are intact.
    assert.equal((await client.getRun(queued.runId)).run?.runId, queued.runId);
    await client.cancelRun(queued.runId, "done with it");
    await del(queued.runId);
  });

  it("tenancy and roles: another tenant's run is NOT_FOUND, read-only is PERMISSION_DENIED, an admin deletes any tenant's", async () => {
    const g = await newRun({ token: T.globex });
    await worker.finish(g.runId);
    const other = await del(g.runId).then(
      () => undefined,
      (e: grpc.ServiceError) => e,
    );
    assert.equal(other?.code, grpc.status.NOT_FOUND);
    const none = await del(ulid()).then(
      () => undefined,
      (e: grpc.ServiceError) => e,
    );
    assert.equal(none?.code, grpc.status.NOT_FOUND);
    assert.equal(
      other?.details.replace(g.runId, "X"),
      none?.details.replace(/run [0-9A-Z]{26}/, "run X"),
      "another tenant's run reads exactly like a missing one",
    );
    await assertGrpcError(del(g.runId, "r", T.acmeReader), grpc.status.PERMISSION_DENIED);
    await assertGrpcError(del(g.runId, "r", null), grpc.status.UNAUTHENTICATED);
    const res = await del(g.runId, "admin cleanup", T.ops);
    assert.equal(res.tenantId, "globex");
    await assertGrpcError(client.getRun(g.runId, T.globex), grpc.status.NOT_FOUND);
  });

  it("hostile run ids and reasons are INVALID_ARGUMENT naming the field", async () => {
    const run = await newRun();
    await worker.finish(run.runId);
    const ids = [
      "",
      "../../etc/passwd",
      `${run.runId}x`,
      "01ARZ3NDEKTSV4RRFFQ69G5FA\n",
      "*",
      "агент",
    ];
    for (const id of ids) {
      const e = await del(id).then(
        () => undefined,
        (x: grpc.ServiceError) => x,
      );
      assert.equal(e?.code, grpc.status.INVALID_ARGUMENT, JSON.stringify(id));
      assert.match(e?.details ?? "", /run_id/);
    }
    const reasons = [
      "",
      "   ",
      "x".repeat(1025),
      "a\nb",
      "tab\there",
      "\x1b[31mred",
      "evil\u202etxt",
      "zero\u200bwidth",
      "nul\u0000byte",
    ];
    for (const reason of reasons) {
      const e = await del(run.runId, reason).then(
        () => undefined,
        (x: grpc.ServiceError) => x,
      );
      assert.equal(e?.code, grpc.status.INVALID_ARGUMENT, JSON.stringify(reason));
      assert.match(e?.details ?? "", /reason/);
    }
    // 1024 characters of several bytes each are fine.
    assert.equal((await del(run.runId, "é".repeat(1024))).deletedNow, true);
  });

  it("ten DeleteRun at once: one deletes, the others answer OK, one run.deleted", async () => {
    const run = await newRun({ key: `k-${ulid()}` });
    const snap = await emitted(artifactDir, "workspace-snapshot", `parallel ${ulid()}`);
    await worker.finish(run.runId, [snap.payload]);
    const all = await Promise.all(Array.from({ length: 10 }, () => del(run.runId)));
    assert.equal(all.filter((x) => x.deletedNow).length, 1);
    const dump = await redisDump(r);
    assert.deepEqual(mentioning(dump, run.runId).sort(), [
      "agentd:feed",
      `agentd:run:${run.runId}:deleted`,
    ]);
    const notices = (await r.xrange("agentd:feed", "-", "+")).filter(([, f]) =>
      f.includes(run.runId),
    );
    assert.equal(notices.length, 1);
    assert.ok(!filesUnder(artifactDir).some((f) => f.endsWith(snap.digest)));
  });

  it("DeleteRun racing ResolveApproval: a paused run is never deleted; an ended one is, and no append recreates it", async () => {
    for (let round = 0; round < 6; round++) {
      const run = await newRun();
      const approvalId = await worker.pause(run.runId);
      const resolve = () =>
        client
          .unary(RunService.method.resolveApproval, {
            approvalId,
            decision: ApprovalDecision.APPROVE,
            reason: "",
          })
          .then(
            () => "resolved",
            (e: grpc.ServiceError) => e.code,
          );
      const remove = () =>
        del(run.runId).then(
          () => "deleted",
          (e: grpc.ServiceError) => e.code,
        );
      const [x, y] = await Promise.all(round % 2 ? [resolve(), remove()] : [remove(), resolve()]);
      const [res, rem] = round % 2 ? [x, y] : [y, x];
      assert.equal(res, "resolved", `round ${round}: the approval is resolved`);
      assert.equal(rem, grpc.status.FAILED_PRECONDITION, `round ${round}: a live run is refused`);
      // Cancel it, then race again: the run ended, so the deletion wins and nothing comes back.
      await client.cancelRun(run.runId, "stop");
      const [x2, y2] = await Promise.all(round % 2 ? [resolve(), remove()] : [remove(), resolve()]);
      const [res2, rem2] = round % 2 ? [x2, y2] : [y2, x2];
      assert.equal(rem2, "deleted", `round ${round}`);
      assert.ok(
        res2 === grpc.status.FAILED_PRECONDITION || res2 === grpc.status.NOT_FOUND,
        `round ${round}: ResolveApproval of an ended/deleted run: ${res2}`,
      );
      await assertStreamGone(r, run.runId);
    }
    // A straggler's append to a deleted run is refused where the data is.
    const run = await newRun();
    await worker.finish(run.runId);
    await del(run.runId);
    await assert.rejects(
      log.append({
        runId: run.runId,
        sessionId: run.sessionId,
        tenantId: "acme",
        payload: completed(),
      }),
      /was deleted/,
    );
    await assertStreamGone(r, run.runId);
  });

  it("DeleteRun racing a takeover: the run is claimed by nobody and deleted once its dead worker's lease is gone", async () => {
    const run = await newRun();
    const dead = playWorker(redis.client(), log, "dead-worker", 1000);
    const c = await dead.claim(run.runId);
    await dead.append(c, [started(c.lease.epoch), completed()]);
    // The worker dies here, before it releases the run: its lease runs out (1 s).
    await dead.close();
    const taker = playWorker(redis.client(), log, "taker", 1000);
    let claimed = false;
    let deleted = false;
    const takeovers = (async () => {
      while (!deleted) {
        const got = await taker.queue.claim("taker", { blockMs: 100 });
        if (got?.runId === run.runId) claimed = true;
        if (got !== undefined) await taker.queue.release(got, { outcome: "requeue" });
      }
    })();
    const outcome = await until("the deletion to go through", async () =>
      del(run.runId).then(
        (x) => {
          deleted = true;
          return x;
        },
        (e: grpc.ServiceError) => {
          assert.equal(e.code, grpc.status.FAILED_PRECONDITION, e.details);
          return undefined;
        },
      ),
    );
    await takeovers;
    assert.equal(outcome.deletedNow, true);
    assert.equal(claimed, false, "an ended run is never handed to a taker");
    await assertStreamGone(r, run.runId);
    assert.equal(await r.exists(`agentd:run:${run.runId}:lease`), 0);
    assert.equal(await r.exists(`agentd:queue:run:${run.runId}`), 0);
    await taker.close();
  });

  it("a server SIGKILLed after the tombstone: the run is already NOT_FOUND; a later call finishes; a restart finishes by itself", async () => {
    for (const point of ["deleteRun.afterMark", "deleteRun.afterArtifacts"]) {
      const run = await newRun({ key: `k-${ulid()}` });
      const snap = await emitted(artifactDir, "workspace-snapshot", `crash ${point} ${ulid()}`);
      await worker.finish(run.runId, [snap.payload]);
      const doomed = await startAgentd("server", flags, { env: { AGENTD_TEST_CRASH_AT: point } });
      const c2 = new GrpcRunClient(doomed.addr, T.acme);
      const err = await c2
        .unary(RunService.method.deleteRun, { runId: run.runId, reason: "crash" })
        .then(
          () => undefined,
          (e: grpc.ServiceError) => e,
        );
      c2.close();
      assert.ok(err !== undefined, "the call did not complete");
      const exit = await doomed.exited;
      assert.equal(exit.signal, "SIGKILL");
      // Half done: the tombstone is there, so the run is gone for readers already.
      assert.equal(await r.exists(`agentd:run:${run.runId}:deleted`), 1);
      assert.equal((await r.zscore("agentd:deleting", run.runId)) !== null, true);
      assert.equal(await r.exists(`agentd:run:${run.runId}:events`), 1, "pieces are left");
      await assertGrpcError(client.getRun(run.runId), grpc.status.NOT_FOUND);
      if (point === "deleteRun.afterMark") {
        const res = await del(run.runId);
        assert.equal(res.deletedNow, false, "finished what was left");
      } else {
        // Any server finishes it at start, without a call.
        const fresh = await startAgentd("server", flags);
        await until("the restarted server to finish the deletion", async () =>
          (await r.zscore("agentd:deleting", run.runId)) === null ? true : undefined,
        );
        await fresh.stop("SIGKILL");
      }
      const dump = await redisDump(r);
      assert.deepEqual(mentioning(dump, run.runId).sort(), [
        "agentd:feed",
        `agentd:run:${run.runId}:deleted`,
      ]);
      assert.ok(!filesUnder(artifactDir).some((f) => f.endsWith(snap.digest)));
    }
  });

  it("a live StreamEvents of a run that ends and is deleted ends; a stored one ends NOT_FOUND or whole", async () => {
    const run = await newRun();
    const c = await worker.claim(run.runId);
    await worker.append(c, [started(c.lease.epoch)]);
    const live = client.streamEvents({ runId: run.runId });
    await live.waitForCount(2);
    await worker.append(c, [completed()]);
    await worker.queue.release(c, { outcome: "terminal" });
    const end = await live.end(30_000);
    assert.equal(end.status.code, grpc.status.OK, "the live stream ended with the run");
    await del(run.runId);
    const after = client.streamEvents({ runId: run.runId, historyOnly: true });
    assert.equal((await after.end(30_000)).status.code, grpc.status.NOT_FOUND);
  });
});

describe("a stored StreamEvents read while its run is deleted", { timeout: 240_000 }, () => {
  it("ends NOT_FOUND, or whole if it was all sent first: never short and OK", async () => {
    const run = await newRun();
    const c = await worker.claim(run.runId);
    const text = "x".repeat(2000);
    const deltas = Array.from({ length: 12_000 }, () => ({
      case: "outputDelta" as const,
      value: create(OutputDeltaSchema, { text }),
    }));
    await Promise.all(
      deltas.map((payload) =>
        log.append({ runId: run.runId, sessionId: run.sessionId, payload, fence: c.lease.epoch }),
      ),
    );
    await worker.append(c, [completed()]);
    await worker.queue.release(c, { outcome: "terminal" });
    const total = 12_002 + 1; // queued + deltas + completed (+ the first: queued is seq 1)
    const call = client.serverStream(RunService.method.streamEvents, { runId: run.runId });
    let got = 0;
    const status = new Promise<grpc.StatusObject>((res) => {
      call.on("data", () => {
        got++;
        if (got === 1) call.pause(); // a slow client: the server's pages wait for it
      });
      call.on("error", () => undefined);
      call.on("status", res);
    });
    await until("the first event", async () => (got > 0 ? true : undefined));
    await del(run.runId);
    call.resume();
    const end = await status;
    if (end.code === grpc.status.OK) assert.equal(got, total - 1, "OK only when whole");
    else assert.equal(end.code, grpc.status.NOT_FOUND, end.details);
    assert.ok(got < total, `${got} events`);
  });
});

describe("PurgeTenant", { timeout: 240_000 }, () => {
  const purge = (tenantId: string, reason: string, token = T.ops) => {
    const call = client.serverStream(RunService.method.purgeTenant, { tenantId, reason }, token);
    const msgs: { runsDeleted: bigint; done: boolean }[] = [];
    return new Promise<{ msgs: typeof msgs; status: grpc.StatusObject }>((res) => {
      call.on("data", (m: { runsDeleted: bigint; done: boolean }) => msgs.push(m));
      call.on("error", () => undefined);
      call.on("status", (status) =>
        res({ msgs, status: { ...status, details: decodeURIComponent(status.details) } }),
      );
    });
  };

  it("admin only; hostile tenant ids and reasons name the field", async () => {
    assert.equal((await purge("globex", "x", T.globex)).status.code, grpc.status.PERMISSION_DENIED);
    for (const [tenant, reason, field] of [
      ["", "r", "tenant_id"],
      ["ACME", "r", "tenant_id"],
      ["a:b", "r", "tenant_id"],
      ["x".repeat(64), "r", "tenant_id"],
      ["globex", "", "reason"],
      ["globex", "\x1b]0;title\x07", "reason"],
    ] as const) {
      const { status } = await purge(tenant, reason);
      assert.equal(status.code, grpc.status.INVALID_ARGUMENT, `${tenant} / ${reason}`);
      assert.match(status.details, new RegExp(field));
    }
  });

  it("refuses while the tenant has live runs; deletes every ended run with progress; records tenant.purged", async () => {
    const tenant = "globex";
    const feed = watch(T.globex);
    const runs: Run[] = [];
    for (let i = 0; i < 60; i++) runs.push(await newRun({ token: T.globex }));
    const live = runs.pop() as Run;
    for (const x of runs) await worker.finish(x.runId);
    const refused = await purge(tenant, "offboarding");
    assert.equal(refused.status.code, grpc.status.FAILED_PRECONDITION);
    assert.match(
      refused.status.details,
      new RegExp(`1 live run \\(${live.runId}\\).*cancel them first`),
    );
    await client.cancelRun(live.runId, "offboarding", T.globex);
    // An upload no run used: its receipt would keep the blob for a day after the purge.
    const up = await client.uploadWorkspace(
      [await tarOf([{ name: "u.txt", data: `uploaded ${ulid()}\n` }])],
      { auth: T.globex },
    );
    assert.ok(filesUnder(artifactDir).some((f) => f.endsWith(up.digest)));
    // Policy changes people proposed in the tenant's runs (they hold its commands).
    const changes = new RedisPolicyChangeStore({ client: r, prefix: "agentd:" });
    const ours = await changes.propose(sampleChange({ tenantId: tenant }));
    const theirs = await changes.propose(sampleChange({ tenantId: "acme" }));
    const { msgs, status } = await purge(tenant, "offboarding");
    assert.equal(status.code, grpc.status.OK, status.details);
    assert.equal(await changes.get(ours.id), undefined, "the tenant's policy changes went");
    assert.deepEqual(await changes.get(theirs.id), theirs, "another tenant's stayed");
    const last = msgs.at(-1);
    assert.equal(last?.done, true);
    assert.equal(last?.runsDeleted, 60n);
    assert.ok(msgs.length >= 2, "progress came before the end");
    assert.equal((await client.listRuns({ pageSize: 10 }, T.globex)).runs.length, 0);
    for (const x of [...runs, live]) await assertStreamGone(r, x.runId);
    const purged = await until("tenant.purged in the feed", async () =>
      feed.events.find((e) => e.type === "tenant.purged"),
    );
    if (purged.payload.case === "tenantPurged") {
      assert.equal(purged.payload.value.runsDeleted, 60n);
      assert.equal(purged.payload.value.tenantId, tenant);
    }
    assert.equal(feed.events.filter((e) => e.type === "run.deleted").length, 60);
    feed.cancel();
    assert.ok(
      !filesUnder(artifactDir).some((f) => f.endsWith(up.digest)),
      "the tenant's upload receipt went with the purge, and its blob with it",
    );
    await assert.rejects(
      client.createRun({ prompt: "p", workspaceDigest: up.digest }, T.globex),
      /NOT_FOUND: workspace_digest.*no workspace of yours has digest/,
    );
    // Again: nothing to do, still done.
    const again = await purge(tenant, "again");
    assert.equal(again.msgs.at(-1)?.runsDeleted, 0n);
  });
});
