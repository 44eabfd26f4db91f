/**
 * Run deletion end to end with real processes: a private redis-server, `agentd server`, an
 * `agentd worker` running real containers (the test sandbox image) and a scripted model. A
 * run created with an idempotency key asks for an approval, pauses (its workspace snapshot
 * stored, the container gone), is approved, resumes from the snapshot and completes with a
 * patch. Refused while paused; then deleted: a SCAN of every Redis key and a walk of the
 * artifact directory find nothing of it but its tombstone and its run.deleted notice, and
 * nothing of another run (same workspace) is touched.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, it } from "node:test";
import { ulid } from "ulid";
import { ApprovalDecision } from "../gen/agentd/v1/events_pb.js";
import { RunService, RunState } from "../gen/agentd/v1/run_service_pb.js";
import { type Cluster, startCluster } from "../testing/cluster.ts";
import { filesUnder, mentioning, redisDump } from "../testing/deletion-fixtures.ts";
import { type StubRequest, textReply, toolCallsReply } from "../testing/openai-stub.ts";
import { createRunWatch, type RunWatch } from "../testing/run-watch.ts";
import { tarOf } from "../testing/tar.ts";

const call = (id: string, command: string) => ({
  chunks: toolCallsReply([{ id, name: "process_run", arguments: JSON.stringify({ command }) }]),
});

/**
 * A write (so the pause has a workspace to snapshot), then rm, which asks a person; done.
 * What it writes names the run's prompt: each run's patch and snapshot are its own blobs
 * (the same bytes in two runs would be one shared blob, which no deletion of one removes).
 */
function model({ body }: StubRequest) {
  const messages = (body?.messages ?? []) as { role: string; content?: unknown }[];
  const n = messages.filter((m) => m.role === "tool").length;
  const prompt = JSON.stringify(messages.find((m) => m.role === "user")?.content ?? "");
  const tag = createHash("sha256").update(prompt).digest("hex").slice(0, 16);
  if (n === 0) return call("call_1", `echo written ${tag} > b.txt`);
  if (n === 1) return call("call_2", "rm -f a.txt && echo removed > out.txt");
  return { chunks: textReply(["done"]) };
}

let c: Cluster;
let w: RunWatch;
before(async () => {
  // --approval-hold-ms 0: the run pauses at once (snapshot stored, container removed).
  c = await startCluster({ workers: 1, script: model, workerFlags: ["--approval-hold-ms", "0"] });
  w = createRunWatch(c);
});
after(async () => {
  await c?.stop();
});

it("a run that used an approval, a snapshot, artifacts and an idempotency key leaves nothing behind", {
  timeout: 300_000,
}, async () => {
  const files = [{ name: "a.txt", data: `a ${ulid()}\n` }];
  const key = `e2e-${ulid()}`;
  const prompt = `chaos-delete-${ulid().toLowerCase()}`;
  const { run } = await c.client.createRun({
    prompt,
    workspaceTar: await tarOf(files),
    idempotencyKey: key,
  });
  assert.ok(run);
  c.track(run.runId);
  const s = {
    runId: run.runId,
    sessionId: run.sessionId,
    stream: c.client.streamEvents({ runId: run.runId }),
  };
  const req = await w.waitEvent(s, "approvalRequested");
  await w.waitEvent(s, "runPaused");
  // Paused for an approval: live, refused.
  const refused = await c.client
    .unary(RunService.method.deleteRun, { runId: run.runId, reason: "too early" })
    .then(
      () => undefined,
      (e: { code: number; details: string }) => e,
    );
  assert.equal(refused?.code, 9, "FAILED_PRECONDITION");
  assert.match(decodeURIComponent(refused?.details ?? ""), /paused|queued|running/);
  await c.client.unary(RunService.method.resolveApproval, {
    approvalId: req.approvalId,
    decision: ApprovalDecision.APPROVE,
    reason: "",
  });
  const ended = await w.waitTerminal(run.runId);
  assert.equal(ended.state, RunState.COMPLETED, c.diagnostics());
  s.stream.cancel();
  // Another run on the same workspace: its blobs must stay.
  const { run: other } = await c.client.createRun({
    prompt: "other",
    workspaceTar: await tarOf(files),
  });
  assert.ok(other);
  c.track(other.runId);
  assert.equal(other.workspaceDigest, run.workspaceDigest);
  const os = {
    runId: other.runId,
    sessionId: other.sessionId,
    stream: c.client.streamEvents({ runId: other.runId }),
  };
  const oreq = await w.waitEvent(os, "approvalRequested");
  await c.client.unary(RunService.method.resolveApproval, {
    approvalId: oreq.approvalId,
    decision: ApprovalDecision.APPROVE,
    reason: "",
  });
  const done = await w.waitTerminal(other.runId);
  os.stream.cancel();
  assert.ok(done.state !== RunState.UNSPECIFIED);

  const events = (await c.log.read(run.runId, 0)).map((e) => e.event);
  // A pause's workspace snapshot: an artifact.emitted "workspace-snapshot" (and/or run.paused's digest).
  const snapshots = events.flatMap((e) =>
    e.payload.case === "artifactEmitted" && e.payload.value.name === "workspace-snapshot"
      ? [e.payload.value.digest]
      : e.payload.case === "runPaused" && e.payload.value.snapshotDigest !== ""
        ? [e.payload.value.snapshotDigest]
        : [],
  );
  const emitted = events.flatMap((e) =>
    e.payload.case === "artifactEmitted" ? [e.payload.value.digest] : [],
  );
  assert.ok(snapshots.length > 0, "a snapshot was taken");
  assert.ok(emitted.length > 0, "artifacts were emitted");
  const redis = c.redis.client();
  // Settle: the worker lets go of the run (release) before the deletion is allowed.
  const res = await w.until("the run to be deletable", async () =>
    c.client
      .unary(RunService.method.deleteRun, { runId: run.runId, reason: "e2e" })
      .catch(() => undefined),
  );
  assert.equal(res.deletedNow, true);
  assert.ok(res.artifactsRemoved > 0n, "the run's own patch and snapshot were removed");

  const dump = await redisDump(redis);
  assert.deepEqual(mentioning(dump, run.runId).sort(), [
    "agentd:feed",
    `agentd:run:${run.runId}:deleted`,
  ]);
  const feed = (await redis.xrange("agentd:feed", "-", "+")).filter(([, f]) =>
    f.includes(run.runId),
  );
  assert.equal(feed.length, 1);
  assert.match(feed[0]?.[1].join(" ") ?? "", /run\.deleted/);
  assert.ok(![...dump.values()].some((v) => v.includes(prompt)), "the prompt is nowhere");
  const blobs = filesUnder(c.artifactDir);
  const otherEvents = (await c.log.read(other.runId, 0)).map((e) => e.json).join("\n");
  for (const d of [...snapshots, ...emitted]) {
    if (otherEvents.includes(d))
      assert.ok(
        blobs.some((f) => f.endsWith(d)),
        `shared ${d} stays`,
      );
    else assert.ok(!blobs.some((f) => f.endsWith(d)), `${d} is gone`);
  }
  assert.ok(
    blobs.some((f) => f.endsWith(run.workspaceDigest)),
    "the shared workspace stays",
  );
  // The key cannot bring it back.
  const replay = await c.client
    .createRun({ prompt, workspaceTar: await tarOf(files), idempotencyKey: key })
    .then(
      () => undefined,
      (e: { code: number }) => e,
    );
  assert.equal(replay?.code, 5, "NOT_FOUND");
  redis.disconnect();
});
