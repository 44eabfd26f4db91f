/**
 * At most once, against real processes (a private redis-server, an `agentd server`, two
 * `agentd worker`s, real containers): the worker running a call is SIGKILLed after the call
 * appended its line and while it sleeps; the other worker takes the run over. Counted by
 * EFFECT: the run's final patch adds the line exactly once. The log holds tool.started then
 * one tool.result `interrupted` for the call, and the model's next request carries that
 * answer. Repeated, for a call a person approved (`>> config.yaml` touches config) and for
 * one that needed no approval; and a CancelRun that lands while the run waits to be taken
 * over still leaves the call answered before `run.cancelled`.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { ApprovalDecision, Decision, type Event } from "../gen/agentd/v1/events_pb.js";
import { RunService, RunState } from "../gen/agentd/v1/run_service_pb.js";
import type { AgentdProcess } from "../testing/agentd-process.ts";
import { type Cluster, startCluster } from "../testing/cluster.ts";
import { GrpcRunClient } from "../testing/grpc-run-client.ts";
import {
  type StubReply,
  type StubRequest,
  textReply,
  toolCallsReply,
} from "../testing/openai-stub.ts";
import { createRunWatch, payloads, type RunWatch, type Started } from "../testing/run-watch.ts";

const KILLS = 3;
const FILES = { approve: "config.yaml", auto: "notes.txt", cancel: "notes.txt" } as const;
type Kind = keyof typeof FILES;

const appendOnce = (file: string): StubReply => ({
  chunks: toolCallsReply([
    {
      id: "call_1",
      name: "process_run",
      arguments: JSON.stringify({
        command: `echo added >> ${file} && echo appended && sleep 60`,
        timeoutMs: 120_000,
      }),
    },
  ]),
});

/** One call that appends a line; whatever it is answered, the model then stops. */
function model({ body }: StubRequest): StubReply {
  const messages = (body?.messages ?? []) as { role: string }[];
  const kind = /chaos-once(approve|auto|cancel)-/.exec(JSON.stringify(messages))?.[1] as
    | Kind
    | undefined;
  if (kind === undefined) return { status: 500, body: { error: { message: "stub: no script" } } };
  if (!messages.some((m) => m.role === "tool")) return appendOnce(FILES[kind]);
  return { chunks: textReply(["The line was appended; I leave it at that."]) };
}

let c: Cluster;
let w: RunWatch;
let other: GrpcRunClient;
const dead = new Set<AgentdProcess>();
const HOLD = ["--approval-hold-ms", "60000"];

before(async () => {
  c = await startCluster({ workers: 2, leaseTtlMs: 3000, script: model, workerFlags: HOLD });
  for (const p of c.workers) void p.exited.then(() => dead.add(p));
  w = createRunWatch(c);
  other = new GrpcRunClient(c.server.addr);
});
after(async () => {
  other?.close();
  await c?.stop();
});

async function twoWorkers(): Promise<void> {
  while (c.workers.filter((p) => !dead.has(p)).length < 2) {
    const p = await c.startWorker();
    void p.exited.then(() => dead.add(p));
  }
}

/**
 * A run of `kind` whose call_1 has appended its line and sleeps (approved first when it
 * asks for a person); its worker (the one tool.started names) is SIGKILLed.
 */
async function killedMidCall(kind: Kind): Promise<Started> {
  await twoWorkers();
  const s = await w.submit(`once${kind}`, [{ name: FILES[kind], data: "first: 1\n" }]);
  const decided = await w.waitEvent(s, "policyDecision", (d) => d.callId === "call_1");
  if (kind === "approve") {
    assert.equal(decided.decision, Decision.PREVIEW_APPROVAL, "the policy asks a person");
    const req = await w.waitEvent(s, "approvalRequested");
    await c.client.unary(RunService.method.resolveApproval, {
      approvalId: req.approvalId,
      decision: ApprovalDecision.APPROVE,
      reason: "append it once",
    });
  } else assert.notEqual(decided.decision, Decision.PREVIEW_APPROVAL, "no person asked");
  const started = await w.waitEvent(s, "toolStarted", (t) => t.callId === "call_1");
  await w.waitEvent(s, "toolOutput", (o) => o.callId === "call_1" && o.chunk.includes("appended"));
  const owner = c.workerOf(started.workerId);
  assert.ok(owner !== undefined, `tool.started names a worker of the cluster: ${started.workerId}`);
  await owner.kill();
  return s;
}

/** call_1's tool.started and tool.result, in log order; its result's error. */
function callRecord(events: Event[]): { types: string[]; code: string; message: string } {
  const mine = events.filter(
    (e) =>
      (e.payload.case === "toolStarted" || e.payload.case === "toolResult") &&
      e.payload.value.callId === "call_1",
  );
  const result = payloads(mine, "toolResult")[0];
  return {
    types: mine.map((e) => e.type),
    code: result?.error?.code ?? (result?.ok ? "ok" : ""),
    message: result?.error?.message ?? "",
  };
}

/** The lines the run's final patch adds to `file`. */
async function addedLines(events: Event[], file: string): Promise<string[]> {
  const done = payloads(events, "runCompleted")[0];
  assert.ok(done !== undefined && done.patchDigest !== "", "the run left a patch");
  const parts: Uint8Array[] = [];
  for await (const p of new FsArtifactStore(c.artifactDir).read(done.patchDigest)) parts.push(p);
  const patch = Buffer.concat(parts).toString("utf8");
  assert.ok(patch.includes(`+++ b/${file}`), patch);
  return patch.split("\n").filter((l) => l.startsWith("+") && !l.startsWith("+++"));
}

/** The model's requests for run `s` (its prompt is in every one). */
function requestsOf(s: Started, events: Event[]): string[] {
  const prompt = payloads(events, "runQueued")[0]?.prompt ?? s.runId;
  return c.stub.requests.map((r) => JSON.stringify(r.body ?? {})).filter((b) => b.includes(prompt));
}

async function assertOnce(kind: "approve" | "auto", round: number): Promise<void> {
  const s = await killedMidCall(kind);
  const events = await w.assertHealthy(s.runId);
  const where = `${kind} round ${round}, run ${s.runId}`;
  const rec = callRecord(events);
  assert.deepEqual(rec.types, ["tool.started", "tool.result"], where);
  assert.equal(rec.code, "interrupted", where);
  assert.match(rec.message, /effect is unknown.*not run again/s, where);
  assert.deepEqual(await addedLines(events, FILES[kind]), ["+added"], `${where}: appended once`);
  const asked = requestsOf(s, events);
  assert.ok(asked.length >= 2, `${where}: a step before the kill and one after`);
  const next = asked.at(-1) ?? "";
  assert.match(next, /interrupted/, `${where}: the model was told`);
  assert.match(next, /It was not run again/, `${where}: the model was told`);
  s.stream.cancel();
}

it(`an approved call whose worker is SIGKILLed mid-execution runs once (${KILLS} rounds)`, {
  timeout: 300_000,
}, async () => {
  for (let round = 0; round < KILLS; round++) await assertOnce("approve", round);
});

it("a call that needed no approval: the same, still once", { timeout: 120_000 }, async () => {
  await assertOnce("auto", 0);
});

it("a CancelRun while the run waits to be taken over: the call is answered before run.cancelled", {
  timeout: 120_000,
}, async () => {
  const s = await killedMidCall("cancel");
  // Lands while the dead worker's lease runs out: the run is still RUNNING in the log.
  const answer = await other.cancelRun(s.runId, "stop it");
  const run = await w.waitTerminal(s.runId);
  assert.equal(run.state, RunState.CANCELLED, RunState[run.state]);
  assert.ok(answer.run !== undefined);
  const events = (await c.log.read(s.runId, 0)).map((e) => e.event);
  const rec = callRecord(events);
  assert.deepEqual(rec.types, ["tool.started", "tool.result"]);
  assert.ok(["interrupted", "cancelled"].includes(rec.code), rec.code);
  const resultAt = events.findIndex((e) => e.payload.case === "toolResult");
  assert.equal(events.at(-1)?.type, "run.cancelled");
  assert.ok(resultAt >= 0 && resultAt < events.length - 1, "answered before the run's end");
  await w.until(`the containers of run ${s.runId} to be removed`, async () =>
    (await c.containersOf(s.runId)).length === 0 ? true : undefined,
  );
  s.stream.cancel();
});
