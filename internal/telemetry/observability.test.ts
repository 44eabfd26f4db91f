/**
 * Observability against real processes: a private redis-server, one `agentd server` and
 * two `agentd worker --listen` processes exporting spans over OTLP/HTTP to a receiver, and
 * a real Prometheus (Debian's package) scraping the server's /metrics and both workers'
 * health ports every second.
 *
 * Run A (approval, then completion) checks the metrics with PromQL: exact counts of runs,
 * calls, decisions and approvals. Run B is paused for an approval, resumed by a worker, and
 * taken over after that worker is SIGKILLed mid-call: every span of it (the server's
 * CreateRun, every drive's invoke_agent, chat, execute_tool, kernel.decide) is in the
 * caller's trace, and no attribute holds the command the model ran.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
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
import { type OtlpReceiver, startOtlpReceiver } from "../testing/otlp-receiver.ts";
import { startPrometheus, type TestPrometheus } from "../testing/prometheus.ts";
import { createRunWatch, payloads, type RunWatch } from "../testing/run-watch.ts";
import { tarOf } from "../testing/tar.ts";
import { decisionLabel } from "./event-metrics.ts";
import { REFRESH_MIN_INTERVAL_MS } from "./scrape.ts";

const SECRET_COMMAND = "echo observability-marker-7f3a > out.txt";
const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN = "00f067aa0ba902b7";

const call = (n: number, command: string): StubReply => ({
  chunks: toolCallsReply([
    { id: `call_${n}`, name: "process_run", arguments: JSON.stringify({ command }) },
  ]),
});

/** A: rm (needs approval), then a plain write, then done. B: rm, then a long call, then done. */
function model({ body }: StubRequest): StubReply {
  const messages = (body?.messages ?? []) as { role: string; content?: unknown }[];
  const kind = /obs-(a|b)-[0-9a-z]+/.exec(JSON.stringify(messages))?.[1];
  const n = messages.filter((m) => m.role === "tool").length;
  if (n === 0) return call(1, "rm -f a.txt && echo removed > gone.txt");
  if (kind === "a" && n === 1) return call(2, SECRET_COMMAND);
  if (kind === "b" && n === 1) return call(2, `sleep 3; ${SECRET_COMMAND}`);
  if (kind === "b" && n === 2) return call(3, SECRET_COMMAND);
  return { chunks: textReply(["done"]) };
}

let c: Cluster;
let w: RunWatch;
let otlp: OtlpReceiver;
let prom: TestPrometheus;

function healthAddr(p: AgentdProcess): string {
  const m = /"msg":"health port listening"/.test(p.output())
    ? /"addr":"([0-9.]+:\d+)"[^\n]*"health port listening"/.exec(p.output())
    : null;
  assert.ok(m, `worker ${p.pid} logged its health port:\n${p.output()}`);
  return m[1] as string;
}

before(async () => {
  otlp = await startOtlpReceiver();
  c = await startCluster({
    workers: 2,
    leaseTtlMs: 3000,
    workerFlags: ["--listen", "127.0.0.1:0", "--approval-hold-ms", "0"],
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_BSP_SCHEDULE_DELAY: "100",
    },
    script: model,
  });
  w = createRunWatch(c);
  prom = await startPrometheus({
    server: [c.server.addr],
    worker: c.workers.map(healthAddr),
  });
});

after(async () => {
  await prom?.stop();
  await c?.stop();
  await otlp?.close();
});

async function submit(kind: "a" | "b", traceparent?: string) {
  const { run } = await c.client.createRun(
    {
      prompt: `obs-${kind}-${Date.now().toString(36)}`,
      workspaceTar: await tarOf([{ name: "a.txt", data: "a\n" }]),
    },
    undefined,
    traceparent === undefined ? {} : { traceparent },
  );
  assert.ok(run);
  c.track(run.runId);
  return {
    runId: run.runId,
    sessionId: run.sessionId,
    stream: c.client.streamEvents({ runId: run.runId }),
  };
}

async function approveNext(s: Awaited<ReturnType<typeof submit>>): Promise<void> {
  const requested = await w.waitEvent(s, "approvalRequested");
  await w.waitEvent(s, "runPaused");
  await c.client.unary(RunService.method.resolveApproval, {
    approvalId: requested.approvalId,
    decision: ApprovalDecision.APPROVE,
    reason: "ok",
  });
}

/** A PromQL value once it equals `want` (Prometheus scrapes every second); up to 120 s. */
async function promEquals(q: string, want: number): Promise<void> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const r = await prom.query(q);
    if (r.length === 1 && r[0]?.value === want) return;
    if (Date.now() > deadline) {
      const name = /agentd_[a-z_]+/.exec(q)?.[0] ?? "";
      const series = await prom.query(name);
      assert.fail(
        `waited 120 s for ${q} to be ${want}: ${JSON.stringify(r)}; ${name}: ${JSON.stringify(series)}`,
      );
    }
    await new Promise((res) => setTimeout(res, 250));
  }
}

it("Prometheus scrapes server and workers; PromQL counts what run A did", async () => {
  const targets = await w.until("every target up", async () => {
    const t = await prom.targets();
    return t.length === 3 && t.every((x) => x.health === "up") ? t : undefined;
  });
  assert.equal(targets.length, 3);
  const s = await submit("a");
  await approveNext(s);
  const events = await w.assertHealthy(s.runId);
  const results = payloads(events, "toolResult");
  assert.equal(results.length, 2);
  await promEquals("sum(agentd_runs_created_total)", 1);
  await promEquals('sum(agentd_runs_ended_total{outcome="completed"})', 1);
  await promEquals('sum(agentd_tool_calls_total{tool="process.run",outcome="ok"})', 2);
  await promEquals(
    'sum(agentd_tool_calls_total{tool="process.run",decision="preview_approval"})',
    1,
  );
  const decided = payloads(events, "policyDecision").map((d) => decisionLabel(d.decision));
  for (const label of new Set(decided))
    await promEquals(
      `sum(agentd_policy_decisions_total{decision="${label}"})`,
      decided.filter((x) => x === label).length,
    );
  await promEquals('sum(agentd_approval_wait_seconds_count{decision="approved"})', 1);
  await promEquals('sum(agentd_tool_call_duration_seconds_count{tool="process.run"})', 2);
  await promEquals("sum(agentd_sandbox_create_duration_seconds_count)", 2); // two drives
  await promEquals("sum(agentd_runs_active)", 0);
  const tokens = await prom.query('sum(agentd_model_tokens_total{direction="input"})');
  assert.ok((tokens[0]?.value ?? 0) > 0, "input tokens counted");
  const appends = await prom.query(
    'sum(agentd_event_log_append_duration_seconds_count{log="redis"})',
  );
  assert.ok((appends[0]?.value ?? 0) >= events.length, "every append measured");
  // Both kinds of target pass Prometheus's own lint.
  for (const url of [c.server.url, `http://${healthAddr(c.workers[0] as AgentdProcess)}`]) {
    const text = await (await fetch(`${url}/metrics`)).text();
    execFileSync("promtool", ["check", "metrics"], { input: text });
  }
});

it("a scrape during a Redis pause answers, while Redis is still paused, with agentd_event_log_up 0", async () => {
  const admin = c.redis.client();
  // Paused far longer than the test needs and unpaused by the test itself: an answer that
  // came only once Redis answered again would show agentd_event_log_up 1, not 0. That, not a
  // stopwatch, proves the scrape did not wait for Redis.
  await admin.call("CLIENT", "PAUSE", "120000", "ALL");
  // Scrapes within REFRESH_MIN_INTERVAL_MS of the last refresh share it: wait it out.
  await new Promise((r) => setTimeout(r, REFRESH_MIN_INTERVAL_MS + 100));
  try {
    for (const url of [c.server.url, `http://${healthAddr(c.workers[0] as AgentdProcess)}`]) {
      const res = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(60_000) });
      const text = await res.text();
      assert.equal(res.status, 200);
      assert.match(text, /^agentd_event_log_up 0$/m);
      assert.match(text, /^agentd_runs_created_total /m, "the other values still there");
    }
    const ready = await fetch(`http://${healthAddr(c.workers[0] as AgentdProcess)}/readyz`, {
      signal: AbortSignal.timeout(60_000),
    });
    assert.equal(ready.status, 503, "a worker that cannot reach Redis is not ready");
  } finally {
    await admin.call("CLIENT", "UNPAUSE");
  }
  // Back up within a few scrapes once Redis answers again.
  await w.until(
    "agentd_event_log_up 1 again",
    async () => {
      const text = await fetch(`${c.server.url}/metrics`).then((r) => r.text());
      return /^agentd_event_log_up 1$/m.test(text) ? true : undefined;
    },
    10_000,
  );
  const health = await fetch(`http://${healthAddr(c.workers[1] as AgentdProcess)}/healthz`);
  assert.equal(health.status, 200);
});

it("run B, paused, resumed and taken over, is one trace: the caller's", async () => {
  const s = await submit("b", `00-${TRACE_ID}-${CALLER_SPAN}-01`);
  await approveNext(s);
  // The resumed drive runs the long call: kill its worker in the middle of it.
  await w.waitEvent(s, "toolCall", (v) => v.callId === "call_2");
  // Spans leave a worker every 100 ms; a SIGKILL loses what has not left yet. The approved
  // call's recheck ends a few ms before call_2 starts (an exec takes ~1 ms): wait for it.
  await w.until(
    "the recheck's span",
    async () =>
      otlp.spans.some((x) => x.name === "kernel.recheck" && x.traceId === TRACE_ID) || undefined,
  );
  const started = await w.until("the resumed drive's run.resumed", async () => {
    const evs = (await c.log.read(s.runId, 0)).map((e) => e.event);
    return payloads(evs, "runResumed")[0];
  });
  const victim = c.workerOf(started.workerId);
  assert.ok(victim, `the worker ${started.workerId} is ours`);
  await victim.kill();
  const events = await w.assertHealthy(s.runId);
  const drivesInLog = payloads(events, "runStarted").length + payloads(events, "runResumed").length;
  assert.ok(
    drivesInLog >= 3,
    `started, resumed, taken over: ${events.map((e) => e.type).join(" ")}`,
  );
  await promEquals("sum(max_over_time(agentd_lease_takeovers_total[5m]))", 1);

  const ofRun = await w.until("the run's spans", () => {
    const drives = otlp.spans.filter(
      (x) => x.name === "invoke_agent agentd" && x.attributes["agentd.run.id"] === s.runId,
    );
    const done = drives.some((d) => d.attributes["agentd.run.outcome"] === "completed");
    return done ? otlp.spans.filter((x) => x.traceId === TRACE_ID) : undefined;
  });
  const names = new Set(ofRun.map((x) => x.name));
  for (const want of [
    "agentd.v1.RunService/CreateRun",
    "invoke_agent agentd",
    "execute_tool process.run",
    "kernel.decide",
    "kernel.recheck",
    "sandbox process.run",
  ])
    assert.ok(names.has(want), `${want} in the trace: ${[...names].join(", ")}`);
  assert.ok(
    [...names].some((n) => n.startsWith("chat ")),
    `a chat span: ${[...names].join(", ")}`,
  );
  // Every span that names the run is in the caller's trace, but the approver's RPC (the
  // approver's own trace), which names the approval and its decision.
  const RESOLVE = "agentd.v1.RunService/ResolveApproval";
  const resolved = otlp.spans.find(
    (x) => x.name === RESOLVE && x.attributes["agentd.run.id"] === s.runId,
  );
  assert.equal(resolved?.attributes["agentd.approval.decision"], "approved");
  const named = otlp.spans.filter(
    (x) => x.attributes["agentd.run.id"] === s.runId && x.name !== RESOLVE,
  );
  assert.ok(named.length > 0);
  for (const x of named) assert.equal(x.traceId, TRACE_ID, `${x.name} in the caller's trace`);
  // The CreateRun span is the caller's span's child; drives hang under CreateRun.
  const create = ofRun.find((x) => x.name === "agentd.v1.RunService/CreateRun");
  assert.equal(create?.parentSpanId, CALLER_SPAN);
  const drives = ofRun.filter((x) => x.name === "invoke_agent agentd");
  for (const d of drives) assert.equal(d.parentSpanId, create?.spanId);
  // The victim's own drive never ended (no span of its own, a stand-in from the taker:
  // lost-drive-span.test.ts); the pause and the takeover's did.
  assert.ok(drives.length >= 2, `at least two drives: ${drives.length}`);
  const pids = new Set(drives.map((d) => d.resource["process.pid"]));
  const taker = c.workers.find((p) => p !== victim) as AgentdProcess;
  assert.ok(pids.has(taker.pid), `the taker's drive is in the trace: ${[...pids].join(", ")}`);
  const outcomes = drives.map((d) => d.attributes["agentd.run.outcome"]);
  assert.ok(outcomes.includes("paused") && outcomes.includes("completed"), outcomes.join(", "));
  const chat = ofRun.find((x) => x.name.startsWith("chat "));
  assert.equal(typeof chat?.attributes["gen_ai.usage.input_tokens"], "number");
  const approval = ofRun.find((x) => x.attributes["agentd.approval.id"] !== undefined);
  assert.ok(approval, "the call that asked for a person names its approval");
  // No attribute carries the model's command (a tool input) or its output.
  const dump = JSON.stringify(otlp.spans.map((x) => [x.attributes, x.status]));
  assert.ok(!dump.includes("observability-marker"), "no tool input or output in any attribute");
  // The log line a drive writes in its span carries the trace and that span's id.
  const ended = taker
    .output()
    .split("\n")
    .filter((l) => l.includes('"msg":"drive ended"') && l.includes(s.runId));
  assert.ok(ended.length >= 1, `the taker logged its drive:\n${taker.output().slice(-3000)}`);
  for (const l of ended) {
    const line = JSON.parse(l) as { trace_id?: string; span_id?: string };
    assert.equal(line.trace_id, TRACE_ID);
    assert.ok(
      drives.some((d) => d.spanId === line.span_id),
      "the drive's span id",
    );
  }
});
