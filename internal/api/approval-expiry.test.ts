/**
 * An approval that expired while its run was paused: the first look at it (ListApprovals,
 * or a late ResolveApproval) denies it in the log and puts the paused run back on the queue,
 * so a worker resumes it with the denial instead of the run staying paused for good.
 * Real `agentd server` on a private Redis; the test plays the worker on the same queue.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { ulid } from "ulid";
import {
  ApprovalDecision,
  ApprovalRequestedSchema,
  ApprovalResolvedSchema,
  RunCancelledSchema,
  RunPausedSchema,
  RunStartedSchema,
} from "../gen/agentd/v1/events_pb.js";
import { RunService, RunState } from "../gen/agentd/v1/run_service_pb.js";
import { RedisRunQueue } from "../scheduler/redis-run-queue.ts";
import { type Stack, startStack, TOKENS } from "../testing/api-fixtures.ts";
import { assertGrpcError, grpc } from "../testing/grpc-run-client.ts";
import { until } from "../testing/until.ts";

let stack: Stack;
let queue: RedisRunQueue;

before(async () => {
  // The stack's own server does not sweep: only the servers a test starts do.
  stack = await startStack({ env: { AGENTD_APPROVAL_SWEEP_MS: "0" } });
  queue = new RedisRunQueue({ client: stack.redis.client(), leaseTtlMs: 5000 });
});
after(async () => {
  await queue?.close();
  await stack?.stop();
});

/** A run whose worker asked for an approval that expires at `expiresAt` (a minute ago by default), then paused it. */
async function pausedOnExpiredApproval(
  prompt: string,
  expiresAt = Date.now() - 60_000,
): Promise<{ runId: string; id: string; sessionId: string }> {
  const { run } = await stack.client.createRun({ prompt });
  assert.ok(run);
  const claim = await queue.claim("test-worker", { blockMs: 5000 });
  assert.equal(claim?.runId, run.runId);
  const fence = claim.lease.epoch;
  const base = { runId: run.runId, sessionId: run.sessionId, fence };
  await stack.log.append({
    ...base,
    payload: {
      case: "runStarted",
      value: create(RunStartedSchema, { workerId: "test-worker", epoch: BigInt(fence) }),
    },
  });
  const id = `apr_${run.runId}_${ulid()}`;
  // The request and the pause in one commit, as the worker does.
  await Promise.all([
    stack.log.append({
      ...base,
      payload: {
        case: "approvalRequested",
        value: create(ApprovalRequestedSchema, {
          approvalId: id,
          callId: "c1",
          tool: "process.run",
          expiresAt: timestampFromMs(expiresAt),
        }),
      },
    }),
    stack.log.append({
      ...base,
      payload: {
        case: "runPaused",
        value: create(RunPausedSchema, { reason: "approval", approvalId: id }),
      },
    }),
  ]);
  await queue.release(claim, { outcome: "paused" });
  assert.equal(await queue.stateOf(run.runId), "paused");
  return { runId: run.runId, id, sessionId: run.sessionId };
}

/** Polls `check` until it holds (a bounded wait that says what it waited for). */
const waitFor = (what: string, check: () => Promise<boolean>) =>
  until(what, check, { everyMs: 100 });

function expiryDenials(events: { event: { payload: { case?: string; value?: unknown } } }[]) {
  return events.filter(
    (e) =>
      e.event.payload.case === "approvalResolved" &&
      (e.event.payload.value as { resolvedBy: string }).resolvedBy === "expiry",
  );
}

it("ListApprovals denies an expired approval and re-enqueues its paused run", async () => {
  const { runId } = await pausedOnExpiredApproval("expiry via list");
  const listed = await stack.client.unary(RunService.method.listApprovals, { runId });
  assert.equal(listed.approvals.length, 0, "no longer pending");
  assert.equal(expiryDenials(await stack.log.read(runId, 0)).length, 1);
  assert.notEqual(await queue.stateOf(runId), "paused", "back on the queue");
  const got = await stack.client.getRun(runId);
  assert.equal(got.run?.state, RunState.PAUSED);
  assert.equal(got.run?.pendingApprovalId, "", "resumable: a worker takes it with the denial");
  const again = await queue.claim("test-worker", { blockMs: 5000 });
  assert.equal(again?.runId, runId);
  if (again) await queue.release(again, { outcome: "terminal" });
});

it("a late ResolveApproval is refused as expired, and the run is not left paused", async () => {
  const { runId, id } = await pausedOnExpiredApproval("expiry via resolve");
  await assertGrpcError(
    stack.client.unary(
      RunService.method.resolveApproval,
      { approvalId: id, decision: ApprovalDecision.APPROVE },
      TOKENS.acme,
    ),
    grpc.status.FAILED_PRECONDITION,
    /expired/,
  );
  assert.equal(expiryDenials(await stack.log.read(runId, 0)).length, 1, "denied once");
  assert.notEqual(await queue.stateOf(runId), "paused", "back on the queue");
  const again = await queue.claim("test-worker", { blockMs: 5000 });
  assert.equal(again?.runId, runId);
  if (again) await queue.release(again, { outcome: "terminal" });
});

it("the server's sweep denies an expired approval nobody looks at and re-enqueues the run", async () => {
  // Paused (and released) before the sweeping server starts: no sweep between the two.
  const { runId } = await pausedOnExpiredApproval("expiry via sweep");
  const sweeping = await stack.startServer({ env: { AGENTD_APPROVAL_SWEEP_MS: "200" } });
  try {
    await waitFor(
      "denied by the sweep",
      async () => expiryDenials(await stack.log.read(runId, 0)).length > 0,
    );
    await waitFor("back on the queue", async () => (await queue.stateOf(runId)) !== "paused");
    await waitFor("the sweep logged it", async () => /swept paused runs/.test(sweeping.output()));
    await new Promise((r) => setTimeout(r, 500)); // more sweeps: still denied once
    assert.equal(expiryDenials(await stack.log.read(runId, 0)).length, 1);
    assert.deepEqual(await queue.pausedRuns(100), []);
    const again = await queue.claim("test-worker", { blockMs: 5000 });
    assert.equal(again?.runId, runId);
    if (again) await queue.release(again, { outcome: "terminal" });
  } finally {
    await sweeping.stop("SIGTERM", 10_000);
  }
});

it("the sweep re-enqueues a paused run whose approval was resolved but never re-enqueued; leaves a live one", async () => {
  // Resolved in the log without the enqueue that follows it (as when that enqueue failed).
  const stuck = await pausedOnExpiredApproval("resolved, not requeued", Date.now() + 3_600_000);
  await stack.log.append({
    runId: stuck.runId,
    sessionId: stuck.sessionId,
    payload: {
      case: "approvalResolved",
      value: create(ApprovalResolvedSchema, {
        approvalId: stuck.id,
        decision: ApprovalDecision.APPROVE,
        resolvedBy: "alice",
      }),
    },
  });
  // Waiting for a person, not expired: the sweep leaves it alone.
  const waiting = await pausedOnExpiredApproval("still waiting", Date.now() + 3_600_000);
  // Cancelled in the log while its queue record stayed paused: dropped from the queue.
  const ended = await pausedOnExpiredApproval("cancelled", Date.now() + 3_600_000);
  await stack.log.append({
    runId: ended.runId,
    sessionId: ended.sessionId,
    payload: { case: "runCancelled", value: create(RunCancelledSchema, { reason: "test" }) },
  });
  const sweeping = await stack.startServer({ env: { AGENTD_APPROVAL_SWEEP_MS: "200" } });
  try {
    await waitFor("back on the queue", async () => (await queue.stateOf(stuck.runId)) !== "paused");
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(await queue.stateOf(waiting.runId), "paused");
    assert.deepEqual(await queue.pausedRuns(100), [waiting.runId]);
    assert.equal(await queue.stateOf(ended.runId), "ended");
    const events = await stack.log.read(waiting.runId, 0);
    assert.equal(events.at(-1)?.type, "run.paused", "nothing appended to the waiting run");
  } finally {
    await sweeping.stop("SIGTERM", 10_000);
  }
});
