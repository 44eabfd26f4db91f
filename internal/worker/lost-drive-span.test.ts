/**
 * The lost drive's spans are closed by the taker, against real processes (a private
 * redis-server, an `agentd server`, two `agentd worker`s exporting spans over OTLP/HTTP to
 * a real receiver, real containers): a worker SIGKILLed in the middle of a call never
 * exports its drive span nor the call's execute_tool span; the worker that takes the run
 * over emits a stand-in `invoke_agent agentd` span for it (ERROR "worker lost", its worker
 * and epoch, started when the log says it started), the interrupted call as an event on the
 * stand-in and on its own drive span, a link from its drive span to the stand-in, and a link
 * from the stand-in to the lost drive's own span id (recorded in run.started). A run paused
 * for an approval and resumed (nothing lost) gets no stand-in.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { ApprovalDecision } from "../gen/agentd/v1/events_pb.js";
import { RunService } from "../gen/agentd/v1/run_service_pb.js";
import type { AgentdProcess } from "../testing/agentd-process.ts";
import { type Cluster, startCluster } from "../testing/cluster.ts";
import {
  type StubReply,
  type StubRequest,
  textReply,
  toolCallsReply,
} from "../testing/openai-stub.ts";
import {
  type OtlpReceiver,
  type ReceivedSpan,
  startOtlpReceiver,
} from "../testing/otlp-receiver.ts";
import { createRunWatch, payloads, type RunWatch } from "../testing/run-watch.ts";
import { eventMs } from "./lost-drive.ts";

const MARKER = "lost-drive-marker-5c1e";
const STATUS_ERROR = 2; // OTLP STATUS_CODE_ERROR

const call = (n: number, command: string): StubReply => ({
  chunks: toolCallsReply([
    {
      id: `call_${n}`,
      name: "process_run",
      arguments: JSON.stringify({ command, timeoutMs: 120_000 }),
    },
  ]),
});

/** lost: a long call (killed with its worker), then done. pause: rm (asks a person), then done. */
function model({ body }: StubRequest): StubReply {
  const messages = (body?.messages ?? []) as { role: string; content?: unknown }[];
  const kind = /chaos-(lost|pause)-/.exec(JSON.stringify(messages))?.[1];
  if (kind === undefined) return { status: 500, body: { error: { message: "stub: no script" } } };
  const n = messages.filter((m) => m.role === "tool").length;
  if (n === 0 && kind === "lost") return call(1, `echo ${MARKER} > m.txt; sleep 90`);
  if (n === 0) return call(1, `rm -f a.txt && echo ${MARKER} > gone.txt`);
  return { chunks: textReply(["done"]) };
}

let c: Cluster;
let w: RunWatch;
let otlp: OtlpReceiver;
const dead = new Set<AgentdProcess>();

before(async () => {
  otlp = await startOtlpReceiver();
  c = await startCluster({
    workers: 2,
    leaseTtlMs: 3000,
    workerFlags: ["--approval-hold-ms", "0"],
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_BSP_SCHEDULE_DELAY: "100",
    },
    script: model,
  });
  for (const p of c.workers) void p.exited.then(() => dead.add(p));
  w = createRunWatch(c);
});

after(async () => {
  await c?.stop();
  await otlp?.close();
});

const drivesOf = (runId: string): ReceivedSpan[] =>
  otlp.spans.filter(
    (x) => x.name === "invoke_agent agentd" && x.attributes["agentd.run.id"] === runId,
  );

/** The run's drive spans, once the drive that completed it exported its own. */
const completedDrives = (runId: string) =>
  w.until(`the completing drive's span of run ${runId}`, () => {
    const drives = drivesOf(runId);
    return drives.some((d) => d.attributes["agentd.run.outcome"] === "completed")
      ? drives
      : undefined;
  });

it("SIGKILL mid-call: the taker's trace holds a stand-in for the lost drive, the interrupted call and the links", {
  timeout: 240_000,
}, async () => {
  const s = await w.submit("lost");
  const started = await w.waitEvent(s, "runStarted");
  await w.waitEvent(s, "toolStarted", (t) => t.callId === "call_1");
  const victim = c.workerOf(started.workerId);
  assert.ok(victim, `the worker ${started.workerId} is ours`);
  await victim.kill();
  const events = await w.assertHealthy(s.runId);
  const resumed = payloads(events, "runResumed");
  assert.equal(resumed.length, 1, `taken over once: ${events.map((e) => e.type).join(" ")}`);
  const taken = resumed[0];
  assert.ok(taken !== undefined);
  assert.notEqual(taken.workerId, started.workerId, "another worker took the run over");
  const result = payloads(events, "toolResult").find((r) => r.callId === "call_1");
  assert.equal(result?.error?.code, "interrupted");

  // Both drives recorded their own span ids in the log.
  assert.match(started.spanId, /^[0-9a-f]{16}$/, "run.started names the lost drive's span");
  assert.match(taken.spanId, /^[0-9a-f]{16}$/, "run.resumed names the taker's span");

  const drives = await completedDrives(s.runId);
  const lost = drives.filter((d) => d.attributes["agentd.drive.lost"] === true);
  assert.equal(lost.length, 1, `one stand-in: ${JSON.stringify(drives.map((d) => d.attributes))}`);
  const standIn = lost[0] as ReceivedSpan;
  const taker = drives.find((d) => d.spanId === taken.spanId);
  assert.ok(taker, "the taker's drive span (the id its run.resumed names) was exported");

  // The stand-in: in the run's trace, under the same parent as every drive, in error.
  assert.equal(standIn.traceId, taker.traceId);
  assert.equal(standIn.parentSpanId, taker.parentSpanId);
  assert.equal(standIn.status.code, STATUS_ERROR);
  assert.equal(standIn.status.message, "worker lost");
  assert.equal(standIn.attributes["agentd.worker.id"], started.workerId);
  assert.equal(standIn.attributes["agentd.lease.epoch"], Number(started.epoch));
  assert.equal(standIn.attributes["agentd.drive.start_from"], "run.started");
  assert.equal(taker.attributes["agentd.lease.epoch"], Number(taken.epoch));
  // It began when run.started was recorded, and ended no later than the taker's start.
  const startedEvent = events.find((e) => e.payload.case === "runStarted");
  assert.equal(BigInt(standIn.startTimeUnixNano), BigInt(eventMs(startedEvent) ?? 0) * 1_000_000n);
  assert.ok(BigInt(standIn.endTimeUnixNano) >= BigInt(standIn.startTimeUnixNano));
  assert.ok(BigInt(standIn.endTimeUnixNano) <= BigInt(taker.startTimeUnixNano));

  // The interrupted call, by name and id, on the stand-in and on the taker's span.
  for (const sp of [standIn, taker]) {
    const ev = sp.events.filter((e) => e.name === "agentd.call.interrupted");
    assert.deepEqual(
      ev.map((e) => e.attributes),
      [{ "gen_ai.tool.name": "process.run", "gen_ai.tool.call.id": "call_1" }],
      `${sp === standIn ? "stand-in" : "taker"} events: ${JSON.stringify(sp.events)}`,
    );
  }
  // The links: taker → stand-in, stand-in → the lost drive's own span (never exported).
  assert.deepEqual(
    taker.links.map((l) => [l.traceId, l.spanId]),
    [[standIn.traceId, standIn.spanId]],
  );
  assert.deepEqual(
    standIn.links.map((l) => [l.traceId, l.spanId]),
    [[taker.traceId, started.spanId]],
  );
  assert.ok(
    !otlp.spans.some((x) => x.spanId === started.spanId),
    "the victim never exported its own drive span",
  );
  // Names and ids only: nothing of the call's input or output in the run's spans.
  const ofRun = otlp.spans.filter((x) => x.traceId === taker.traceId);
  const dump = JSON.stringify(ofRun.map((x) => [x.attributes, x.status, x.events, x.links]));
  assert.ok(!dump.includes(MARKER), "no tool input or output in any attribute or event");
});

it("a clean pause and resume: no stand-in, no link", { timeout: 240_000 }, async () => {
  while (c.workers.filter((p) => !dead.has(p)).length < 2) {
    const p = await c.startWorker();
    void p.exited.then(() => dead.add(p));
  }
  const s = await w.submit("pause");
  const requested = await w.waitEvent(s, "approvalRequested");
  await w.waitEvent(s, "runPaused");
  await c.client.unary(RunService.method.resolveApproval, {
    approvalId: requested.approvalId,
    decision: ApprovalDecision.APPROVE,
    reason: "ok",
  });
  const events = await w.assertHealthy(s.runId);
  const resumed = payloads(events, "runResumed");
  assert.equal(resumed.length, 1, `paused and resumed: ${events.map((e) => e.type).join(" ")}`);
  const drives = await completedDrives(s.runId);
  const outcomes = drives.map((d) => d.attributes["agentd.run.outcome"]).sort();
  assert.deepEqual(outcomes, ["completed", "paused"]);
  for (const d of drives) {
    assert.equal(d.attributes["agentd.drive.lost"], undefined);
    assert.deepEqual(d.links, []);
    assert.deepEqual(d.events, []);
    assert.notEqual(d.status.code, STATUS_ERROR);
  }
  // The resumed drive's span is the one its run.resumed names.
  assert.ok(drives.some((d) => d.spanId === resumed[0]?.spanId));
});
