/**
 * A call reported `interrupted` is dead, against real processes (a private redis-server,
 * an `agentd server`, two `agentd worker`s, real containers): a call that appends a line to
 * a file every 100 ms is cut by its worker's SIGKILL, its SIGTERM, or the loss of its lease
 * (the worker frozen with SIGSTOP past the TTL). In each case the file must stop growing
 * before `interrupted` is in the log, and the run must go on to complete, healthy.
 *
 * Each line holds the host's uptime (/proc/uptime is not namespaced), so "the last line was
 * written before the event" compares one clock with the event's timestamp.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, it } from "node:test";
import type { AgentdProcess } from "../testing/agentd-process.ts";
import { type Cluster, startCluster } from "../testing/cluster.ts";
import {
  type StubReply,
  type StubRequest,
  textReply,
  toolCallsReply,
} from "../testing/openai-stub.ts";
import { createRunWatch, payloads, type RunWatch, type Started } from "../testing/run-watch.ts";

const LEASE_TTL_MS = 3000;
const GROW = "while :; do cut -d' ' -f1 /proc/uptime >> grow.txt; sleep 0.1; done";
const CHECK = "wc -l < grow.txt; sleep 1; wc -l < grow.txt; tail -n 1 grow.txt";

const call = (n: number, command: string): StubReply => ({
  chunks: toolCallsReply([
    {
      id: `call_${n}`,
      name: "process_run",
      arguments: JSON.stringify({ command, timeoutMs: 120_000 }),
    },
  ]),
});

/** grow (a long call), then — once it was interrupted — check that it stopped, then done. */
function model({ body }: StubRequest): StubReply {
  const messages = (body?.messages ?? []) as { role: string; content?: unknown }[];
  if (!/chaos-grow-/.test(JSON.stringify(messages)))
    return { status: 500, body: { error: { message: "stub: no script" } } };
  const results = messages.filter((m) => m.role === "tool").map((m) => JSON.stringify(m.content));
  if (results.length === 0) return call(1, GROW);
  if (results.length === 1) return call(2, CHECK);
  return { chunks: textReply(["checked"]) };
}

let c: Cluster;
let w: RunWatch;
const dead = new Set<AgentdProcess>();

before(async () => {
  c = await startCluster({
    workers: 2,
    leaseTtlMs: LEASE_TTL_MS,
    script: model,
    workerFlags: ["--shutdown-grace-ms", "2000"],
  });
  for (const p of c.workers) void p.exited.then(() => dead.add(p));
  w = createRunWatch(c);
});
after(async () => {
  await c?.stop();
});

async function twoWorkers(): Promise<void> {
  while (c.workers.filter((p) => !dead.has(p)).length < 2) {
    const p = await c.startWorker(["--shutdown-grace-ms", "2000"]);
    void p.exited.then(() => dead.add(p));
  }
}

const uptime = (): number => Number(readFileSync("/proc/uptime", "utf8").split(" ")[0]);

/** A run whose first call is growing its file; with the worker that runs it. */
async function growing(): Promise<{ s: Started; owner: AgentdProcess }> {
  await twoWorkers();
  const s = await w.submit("grow");
  const started = await w.waitEvent(s, "runStarted");
  await w.waitEvent(s, "policyDecision", (d) => d.callId === "call_1");
  await new Promise((r) => setTimeout(r, 800)); // it writes for a while
  const owner = c.workerOf(started.workerId);
  assert.ok(owner !== undefined);
  return { s, owner };
}

/**
 * After the run completed: call_1 was recorded `interrupted`, the file's last line was
 * written before that record, and call_2 (made after it) saw the file standing still.
 */
async function assertStoppedBeforeInterrupted(s: Started): Promise<void> {
  const events = await w.assertHealthy(s.runId);
  const resultEvent = events.find(
    (e) => e.payload.case === "toolResult" && e.payload.value.callId === "call_1",
  );
  assert.ok(resultEvent?.payload.case === "toolResult");
  assert.equal(resultEvent.payload.value.error?.code, "interrupted");
  const second = payloads(events, "toolResult").find((r) => r.callId === "call_2");
  assert.ok(second?.ok, JSON.stringify(second?.error));
  const doc = JSON.parse(second.outputJson) as { result?: { stdout: string }; stdout?: string };
  const out = doc.result ?? (doc as { stdout: string }); // a previewed call's output: { preview, result }
  const [before, afterOneSecond, last] = out.stdout.trim().split("\n");
  assert.equal(
    before,
    afterOneSecond,
    `the file stood still after interrupted (counter lines: ${out.stdout.trim()})`,
  );
  const recordedAt = Number(resultEvent.ts?.seconds) * 1000 + (resultEvent.ts?.nanos ?? 0) / 1e6;
  const uptimeAtRecord = uptime() - (Date.now() - recordedAt) / 1000;
  assert.ok(
    Number(last) <= uptimeAtRecord + 0.02,
    `last line written at uptime ${last}, interrupted recorded at ${uptimeAtRecord.toFixed(2)}`,
  );
}

it("SIGKILL: the new owner kills the call's processes before it records interrupted", {
  timeout: 90_000,
}, async () => {
  const { s, owner } = await growing();
  await owner.kill();
  await assertStoppedBeforeInterrupted(s);
});

it("SIGTERM: the stopping worker kills its call late in the grace period and records interrupted", {
  timeout: 90_000,
}, async () => {
  const { s, owner } = await growing();
  const exit = await owner.stop("SIGTERM", 15_000);
  assert.equal(exit.code, 0, owner.output());
  const events = await w.assertHealthy(s.runId);
  const interrupted = payloads(events, "toolResult").find((r) => r.callId === "call_1");
  assert.match(
    interrupted?.error?.message ?? "",
    /worker stopped this call/,
    "by the stopping worker itself",
  );
  await assertStoppedBeforeInterrupted(s);
});

it("lease lost (the worker frozen past the TTL): the call is killed and the old owner never writes again", {
  timeout: 240_000, // a safety net: the waits inside give up after 120 s, saying what for
}, async () => {
  const { s, owner } = await growing();
  process.kill(owner.pid, "SIGSTOP");
  try {
    await w.waitEvent(s, "runResumed");
  } finally {
    process.kill(owner.pid, "SIGCONT");
  }
  await assertStoppedBeforeInterrupted(s);
  const events = await w.assertHealthy(s.runId);
  const epochs = events.flatMap((e) =>
    e.payload.case === "runResumed" || e.payload.case === "runStarted"
      ? [Number(e.payload.value.epoch)]
      : [],
  );
  assert.ok(epochs.length >= 2 && (epochs.at(-1) ?? 0) > (epochs[0] ?? 0), `epochs ${epochs}`);
  await w.until(
    "the old owner to notice",
    () => (/lease lost/.test(owner.output()) ? true : undefined),
    10_000,
  );
});
