/**
 * Approve and cancel racing from two clients at once, against real processes (redis, a
 * server, a worker holding runs that wait for a person, real containers), 10 rounds. Every
 * CancelRun answers OK — never FAILED_PRECONDITION for a live run — with the state the run
 * really ended in; nothing is appended after a terminal event; once a cancel request is in
 * the log, no new call is proposed to the kernel and an approved call that had not started
 * never runs; ResolveApproval after the end is FAILED_PRECONDITION.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { ApprovalDecision } from "../gen/agentd/v1/events_pb.js";
import { RunService, RunState } from "../gen/agentd/v1/run_service_pb.js";
import { type Cluster, startCluster } from "../testing/cluster.ts";
import { GrpcRunClient } from "../testing/grpc-run-client.ts";
import {
  type StubReply,
  type StubRequest,
  textReply,
  toolCallsReply,
} from "../testing/openai-stub.ts";
import { createRunWatch, type RunWatch } from "../testing/run-watch.ts";

const call = (n: number, command: string): StubReply => ({
  chunks: toolCallsReply([
    { id: `call_${n}`, name: "process_run", arguments: JSON.stringify({ command }) },
  ]),
});

/** rm asks a person; after it, two more calls; then done. */
function model({ body }: StubRequest): StubReply {
  const n = ((body?.messages ?? []) as { role: string }[]).filter((m) => m.role === "tool").length;
  if (n === 0) return call(1, "rm -f a.txt && echo removed > out.txt");
  if (n < 3) return call(n + 1, `echo step ${n}`);
  return { chunks: textReply(["done"]) };
}

let c: Cluster;
let w: RunWatch;
let other: GrpcRunClient;
before(async () => {
  c = await startCluster({
    workers: 1,
    script: model,
    workerFlags: ["--approval-hold-ms", "30000"],
  });
  w = createRunWatch(c);
  other = new GrpcRunClient(c.server.addr);
});
after(async () => {
  other?.close();
  await c?.stop();
});

it("approve vs cancel from two clients: cancel is never lost and nothing runs after it", {
  timeout: 240_000,
}, async () => {
  for (let round = 0; round < 10; round++) {
    const s = await w.submit("race");
    const req = await w.waitEvent(s, "approvalRequested");
    // A few ms apart, alternating which goes first.
    const approve = () =>
      c.client
        .unary(RunService.method.resolveApproval, {
          approvalId: req.approvalId,
          decision: ApprovalDecision.APPROVE,
          reason: "",
        })
        .then(
          () => "approved",
          (e: Error) => `approve failed: ${e.message}`,
        );
    const cancel = () => other.cancelRun(s.runId, "race");
    const [first, second] = round % 2 === 0 ? [approve, cancel] : [cancel, approve];
    const p1 = first();
    await new Promise((r) => setTimeout(r, round % 3));
    const p2 = second();
    const [a, b] = await Promise.all([p1, p2]);
    const answer = (round % 2 === 0 ? b : a) as Awaited<ReturnType<GrpcRunClient["cancelRun"]>>;
    const ended = await w.waitTerminal(s.runId);
    assert.equal(
      answer.run?.state,
      ended.state,
      `round ${round}: CancelRun answered the final state`,
    );
    const events = (await c.log.read(s.runId, 0)).map((e) => e.event);
    const last = events.at(-1);
    assert.ok(
      ["run.completed", "run.failed", "run.cancelled"].includes(last?.type ?? ""),
      `round ${round}: ends with its terminal event`,
    );
    const cancelAt = events.findIndex((e) => e.payload.case === "runCancelRequested");
    if (ended.state === RunState.CANCELLED && cancelAt >= 0) {
      const after = events.slice(cancelAt);
      assert.equal(
        after.filter((e) => e.payload.case === "toolCall").length,
        0,
        `round ${round}: no call after the cancel request`,
      );
      const ran = after.filter((e) => e.payload.case === "toolResult" && e.payload.value.ok);
      assert.equal(ran.length, 0, `round ${round}: nothing executed after the cancel request`);
    }
    // Nothing is approved for an ended run.
    await assert.rejects(
      c.client.unary(RunService.method.resolveApproval, {
        approvalId: req.approvalId,
        decision: ApprovalDecision.DENY,
        reason: "",
      }),
      /FAILED_PRECONDITION|already ended|no longer be resolved/i,
    );
    s.stream.cancel();
  }
});
