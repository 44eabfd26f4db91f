/**
 * The documented queries (docs/observability.md, "Useful queries") against a real Prometheus
 * scraping real processes — `agentd server`, `agentd worker --listen` and `agentd dev` —
 * across a restart of each, checked against what the test did.
 *
 * The processes start fresh (no run yet) and every documented query answers: a series born
 * at its first event would leave `sum()` empty and `increase()` blind to that event. Then one
 * run completes, every process is restarted on its port, and the restarted worker drives
 * five more (three of them queued behind its two slots): one fails (the first failure of
 * that process), three complete and one waits for a person. The failure ratio is 1 of 5 and
 * then, once the approval is given, 1 of 6; pending approvals 1 then 0; the queue wait p95
 * lies within what the runs' own times allow.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { RedisEventLog } from "../eventlog/redis-event-log.ts";
import { ApprovalDecision, type Event } from "../gen/agentd/v1/events_pb.js";
import { RunService } from "../gen/agentd/v1/run_service_pb.js";
import { LABEL_POOL, LABEL_RUN } from "../sandbox/docker-sandbox.ts";
import { type AgentdProcess, startAgentd } from "../testing/agentd-process.ts";
import { writeTestPolicy } from "../testing/cluster.ts";
import { requireDocker } from "../testing/docker.ts";
import { GrpcRunClient } from "../testing/grpc-run-client.ts";
import {
  type OpenAiStub,
  type StubReply,
  type StubRequest,
  startOpenAiStub,
  textReply,
  toolCallsReply,
} from "../testing/openai-stub.ts";
import { freePort, startPrometheus, type TestPrometheus } from "../testing/prometheus.ts";
import { startRedis, type TestRedis } from "../testing/redis-server.ts";
import { tarOf } from "../testing/tar.ts";

/** The documented queries, read from the docs: a query that drifts from them fails here. */
function documentedQuery(topic: string): string {
  const doc = readFileSync(new URL("../../docs/observability.md", import.meta.url), "utf8");
  const block = /```promql\n([\s\S]*?)```/.exec(doc)?.[1] ?? "";
  const lines = block.split("\n");
  const at = lines.findIndex((l) => l.startsWith("#") && l.includes(topic));
  const query = lines[at + 1];
  assert.ok(at >= 0 && query !== undefined, `docs/observability.md documents "${topic}"`);
  return query;
}
const FAILURE_RATIO = documentedQuery("failure ratio");
const PENDING = documentedQuery("waiting for a person");
const QUEUE_P95 = documentedQuery("queue wait");
/** agentd_queue_wait_seconds' upper bounds (metrics.ts), for the p95's bucket. */
const WAIT_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];

/**
 * Model answers wait for this gate: the restarted worker's first scrape must come before it
 * counts anything. A restarted process whose counter already matches its predecessor's at
 * its first scrape (1 → 1) is a reset Prometheus cannot see — true of every exporter.
 */
let gate: Promise<void> = Promise.resolve();

/** "fail": the provider refuses (400); "ask": a call that needs a person; else done at once. */
async function model({ body }: StubRequest): Promise<StubReply> {
  await gate;
  const messages = (body?.messages ?? []) as { role: string }[];
  const kind = /mr-(ok|fail|ask)-/.exec(JSON.stringify(messages))?.[1];
  if (kind === "fail") return { status: 400, body: { error: { message: "stub: refused" } } };
  const calls = messages.filter((m) => m.role === "tool").length;
  if (kind === "ask" && calls === 0)
    return {
      chunks: toolCallsReply([
        {
          id: "call_1",
          name: "process_run",
          arguments: JSON.stringify({ command: "rm -f a.txt" }),
        },
      ]),
    };
  return { chunks: textReply(["done"]) };
}

let dir: string;
let redis: TestRedis;
let stub: OpenAiStub;
let prom: TestPrometheus;
let client: GrpcRunClient;
let log: RedisEventLog;
let policyFile: string;
const ports = { server: 0, worker: 0, dev: 0 };
const live: Record<keyof typeof ports, AgentdProcess | undefined> = {
  server: undefined,
  worker: undefined,
  dev: undefined,
};
const pids: number[] = [];
const runs: string[] = [];

async function start(which: keyof typeof ports): Promise<AgentdProcess> {
  const listen = ["--listen", `127.0.0.1:${ports[which]}`];
  const common = ["--policy", policyFile, "--lease-ttl-ms", "3000", ...listen];
  const shared = ["--event-log", redis.url, "--artifact-dir", join(dir, "artifacts")];
  const model = { OPENAI_API_KEY: "test", OPENAI_BASE_URL: stub.baseURL };
  const p =
    which === "server"
      ? await startAgentd("server", [...shared, ...common, "--insecure-no-auth"])
      : which === "worker"
        ? await startAgentd(
            "worker",
            [...shared, ...common, "--concurrency", "2", "--approval-hold-ms", "0"],
            { env: model },
          )
        : await startAgentd("dev", ["--data-dir", join(dir, "dev"), ...common], { env: model });
  live[which] = p;
  pids.push(p.pid);
  return p;
}

before(async () => {
  await requireDocker();
  dir = mkdtempSync(join(tmpdir(), "agentd-metrics-restart-"));
  policyFile = writeTestPolicy(dir);
  redis = await startRedis();
  stub = await startOpenAiStub(model);
  ports.server = await freePort();
  ports.worker = await freePort();
  ports.dev = await freePort();
  await Promise.all([start("server"), start("worker"), start("dev")]);
  client = new GrpcRunClient(`127.0.0.1:${ports.server}`);
  log = new RedisEventLog({ client: redis.client() });
  prom = await startPrometheus({
    server: [`127.0.0.1:${ports.server}`],
    worker: [`127.0.0.1:${ports.worker}`],
    dev: [`127.0.0.1:${ports.dev}`],
  });
});

after(async () => {
  await prom?.stop();
  await Promise.allSettled(Object.values(live).map((p) => p?.kill()));
  client?.close();
  await log?.close();
  const docker = await requireDocker();
  const owners = new Set(pids.map((pid) => `${hostname()}:${pid}`));
  const left = await docker.listContainers({ all: true });
  await Promise.allSettled(
    left
      .filter(
        (c) => runs.includes(c.Labels[LABEL_RUN] ?? "") || owners.has(c.Labels[LABEL_POOL] ?? ""),
      )
      .map((c) => docker.getContainer(c.Id).remove({ force: true, v: true })),
  );
  await stub?.close();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Polls `fn` every 250 ms until it gives a value; fails after 120 s saying what it waited for. */
async function until<T>(what: string, fn: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + 120_000;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) assert.fail(`waited 120 s for ${what} (last error: ${last})`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The query's one value once `ok` holds for it (Prometheus scrapes every second). */
async function promValue(q: string, ok: (v: number) => boolean, what: string): Promise<number> {
  let seen = "";
  try {
    return await until(`${what}: ${q}`, async () => {
      const r = await prom.query(q);
      seen = JSON.stringify(r);
      return r.length === 1 && ok(r[0]?.value as number) ? (r[0]?.value as number) : undefined;
    });
  } catch (err) {
    const name = /agentd_[a-z_]+/.exec(q)?.[0] ?? "";
    const raw = await fetch(
      `${prom.url}/api/v1/query?query=${encodeURIComponent(`${name}[1h]`)}`,
    ).then((r) => r.text());
    throw new Error(`${(err as Error).message}; last answer ${seen}; ${name}[1h]: ${raw}`);
  }
}

/** Every target's current process scraped: its start time as Prometheus last saw it. */
async function scrapedSince(job: keyof typeof ports, sinceS: number): Promise<void> {
  await promValue(
    `max(process_start_time_seconds{job="${job}"})`,
    (v) => v >= sinceS,
    `the restarted ${job} scraped`,
  );
}

async function submit(kind: "ok" | "fail" | "ask"): Promise<string> {
  const { run } = await client.createRun({
    prompt: `mr-${kind}-${Date.now().toString(36)}`,
    workspaceTar: await tarOf([{ name: "a.txt", data: "a\n" }]),
  });
  assert.ok(run);
  runs.push(run.runId);
  return run.runId;
}

async function eventsOf(runId: string): Promise<Event[]> {
  return (await log.read(runId, 0)).map((e) => e.event);
}

async function waitFor(runId: string, types: string[]): Promise<Event[]> {
  return until(`run ${runId} to reach ${types.join(" or ")}`, async () => {
    const evs = await eventsOf(runId);
    return evs.some((e) => types.includes(e.type)) ? evs : undefined;
  });
}

const ENDS = ["run.completed", "run.failed", "run.cancelled"];

/** When `p` logged its claim of `runId` (the drive's clock starts just after), ms. */
function claimedAt(p: AgentdProcess, runId: string): number {
  const line = p
    .output()
    .split("\n")
    .find((l) => l.includes('"msg":"run claimed"') && l.includes(runId));
  assert.ok(line, `the worker logged its claim of ${runId}`);
  return Date.parse((JSON.parse(line) as { time: string }).time);
}

/** Queue-wait bounds of each run, seconds: [its claim was logged, run.started]. */
const waits: [number, number][] = [];

function boundsOf(evs: Event[], claimMs: number): [number, number] {
  const queued = timestampMs(evs[0]?.ts ?? assert.fail("run.queued has a ts"));
  const started = evs.find((e) => e.type === "run.started")?.ts;
  assert.ok(started, "the run started");
  return [Math.max(0, claimMs - queued) / 1000, (timestampMs(started) - queued) / 1000];
}

it("fresh processes: every documented query answers, before any run", async () => {
  await until("every target up", async () => {
    const t = await prom.targets();
    return t.length === 3 && t.every((x) => x.health === "up") ? t : undefined;
  });
  // 0/0: one sample (NaN), not an empty answer.
  await promValue(FAILURE_RATIO, Number.isNaN, "the failure ratio answers");
  await promValue(PENDING, (v) => v === 0, "nobody waits");
  await promValue(QUEUE_P95, Number.isNaN, "the queue wait p95 answers");
  // The known label sets are there at 0 on every process.
  for (const job of Object.keys(ports)) {
    await promValue(
      `count(agentd_runs_ended_total{job="${job}"} == 0)`,
      (v) => v === 3,
      `${job}: runs ended by each outcome at 0`,
    );
    await promValue(
      `count(agentd_approval_wait_seconds_count{job="${job}"} == 0)`,
      (v) => v === 3,
      `${job}: approval waits by each decision at 0`,
    );
  }
  for (const job of ["worker", "dev"]) {
    await promValue(`sum(agentd_worker_slots{job="${job}"})`, (v) => v === 2, `${job}: its slots`);
    await promValue(
      `count(agentd_tool_calls_total{job="${job}",tool="process.run",outcome="error"})`,
      (v) => v === 5,
      `${job}: process.run errors by each decision at 0`,
    );
  }
});

it("across a restart of each process the queries count what the runs did", async () => {
  const r1 = await submit("ok");
  const first = await waitFor(r1, ENDS);
  assert.equal(first.at(-1)?.type, "run.completed");
  const before = live.worker as AgentdProcess;
  waits.push(boundsOf(first, claimedAt(before, r1)));
  await promValue(FAILURE_RATIO, (v) => v === 0, "no run failed yet");

  // Every process restarted on its port, and scraped before it counts anything.
  const restartedAt = Date.now();
  await live.worker?.stop();
  await live.server?.stop();
  await live.dev?.stop();
  await Promise.all([start("server"), start("worker"), start("dev")]);
  client.close();
  client = new GrpcRunClient(`127.0.0.1:${ports.server}`);
  for (const job of Object.keys(ports) as (keyof typeof ports)[])
    await scrapedSince(job, Math.floor(restartedAt / 1000));

  // Two runs take the worker's two slots and wait at the model; the other three wait in the
  // queue until the model answers (at least 3 s).
  let open = (): void => undefined;
  gate = new Promise((r) => {
    open = r;
  });
  const queued = {
    fail: await submit("fail"),
    ok: [await submit("ok"), await submit("ok"), await submit("ok")],
    ask: await submit("ask"),
  };
  const worker = live.worker as AgentdProcess;
  await until("both slots taken", async () =>
    (worker.output().match(/"msg":"run claimed"/g) ?? []).length >= 2 ? true : undefined,
  );
  await new Promise((r) => setTimeout(r, 3000));
  open();

  const failed = await waitFor(queued.fail, ENDS);
  assert.equal(failed.at(-1)?.type, "run.failed", "the provider's 400 failed the run");
  waits.push(boundsOf(failed, claimedAt(worker, queued.fail)));
  for (const id of queued.ok) {
    const evs = await waitFor(id, ENDS);
    assert.equal(evs.at(-1)?.type, "run.completed");
    waits.push(boundsOf(evs, claimedAt(worker, id)));
  }
  const asked = await waitFor(queued.ask, ["run.paused"]);
  waits.push(boundsOf(asked, claimedAt(worker, queued.ask)));

  // 1 of 5 ended runs failed; one run waits for a person (paused, counted by the server).
  // Prometheus sees the ends over a few scrapes: the ratio settles on 1/5 (waits until it does).
  await promValue(FAILURE_RATIO, (v) => Math.abs(v - 1 / 5) < 1e-3, "failure ratio 1/5");
  await promValue(PENDING, (v) => v === 1, "one run waits for a person");

  const requested = asked.find((e) => e.payload.case === "approvalRequested");
  assert.ok(requested?.payload.case === "approvalRequested");
  await client.unary(RunService.method.resolveApproval, {
    approvalId: requested.payload.value.approvalId,
    decision: ApprovalDecision.APPROVE,
    reason: "ok",
  });
  const done = await waitFor(queued.ask, ENDS);
  assert.equal(done.at(-1)?.type, "run.completed");
  await promValue(PENDING, (v) => v === 0, "nobody waits any more");
  await promValue(FAILURE_RATIO, (v) => Math.abs(v - 1 / 6) < 1e-3, "failure ratio 1/6");

  // Each end observed one duration, queued to end: the mean is within the runs' own.
  const lived = await Promise.all(
    [r1, queued.fail, ...queued.ok, queued.ask].map(async (id) => {
      const evs = await eventsOf(id);
      const end = evs.findLast((e) => ENDS.includes(e.type))?.ts;
      assert.ok(end && evs[0]?.ts);
      return (timestampMs(end) - timestampMs(evs[0].ts)) / 1000;
    }),
  );
  for (const [outcome, n] of [
    ["completed", 5],
    ["failed", 1],
  ] as const)
    await promValue(
      `sum(increase(agentd_run_duration_seconds_count{outcome="${outcome}"}[1h]))`,
      (v) => v >= n - 0.01 && v < n * 1.1,
      `${n} ${outcome} run durations`,
    );
  const mean = await promValue(
    "sum(increase(agentd_run_duration_seconds_sum[1h])) / sum(increase(agentd_run_duration_seconds_count[1h]))",
    (v) => !Number.isNaN(v),
    "the mean run duration",
  );
  const avg = lived.reduce((a, b) => a + b, 0) / lived.length;
  assert.ok(
    Math.abs(mean - avg) < 0.01 * avg + 0.01,
    `mean run duration ${mean} s, the runs' ${avg} s`,
  );

  // Six runs waited in the queue once each (the resumed one is not queued anew).
  await promValue(
    "sum(increase(agentd_queue_wait_seconds_count[1h]))",
    (v) => v >= 5.99 && v < 6.5,
    "six queue waits (increase() extrapolates by at most a scrape interval)",
  );
  // The p95 lies in the buckets the runs' own bounds allow: rank 0.95 × 6 falls in the
  // longest wait's bucket, which is at least every run's lower bound and at most the highest
  // upper bound.
  const p95 = await promValue(QUEUE_P95, (v) => !Number.isNaN(v), "the queue wait p95");
  const lows = waits.map((w) => w[0]).sort((a, b) => a - b);
  const highs = waits.map((w) => w[1]).sort((a, b) => a - b);
  const lowBucket = WAIT_BUCKETS.findIndex((b) => (lows.at(-1) ?? 0) <= b);
  const floor = lowBucket <= 0 ? 0 : (WAIT_BUCKETS[lowBucket - 1] as number);
  const ceiling = WAIT_BUCKETS.find((b) => (highs.at(-1) ?? 0) <= b) ?? Infinity;
  assert.ok(
    p95 >= floor && p95 <= ceiling,
    `queue wait p95 ${p95} s within [${floor}, ${ceiling}] (runs' bounds ${JSON.stringify(waits)})`,
  );
});
