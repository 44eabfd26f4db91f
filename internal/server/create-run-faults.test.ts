/**
 * Every acknowledged run starts, against real processes: a `bin/agentd server` that
 * SIGKILLs itself at each named point of CreateRun (AGENTD_TEST_CRASH_AT), a run stranded
 * in the log without a queue record (as a server before RunAdmission left it), and an AOF
 * cut inside the one step that stores `run.queued` and the queue record. In every case the
 * retry with the same idempotency key gets a run that a worker then drives to its end, and
 * exactly one run exists for the key.
 *
 * No worker runs until the last test: what each fault left in Redis is checked first, and
 * nothing claims a run before it is.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync, truncateSync } from "node:fs";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { ulid } from "ulid";
import { RunState } from "../gen/agentd/v1/run_service_pb.js";
import { schedulerKeys } from "../scheduler/redis-keys.ts";
import { type AgentdProcess, startAgentd } from "../testing/agentd-process.ts";
import { type Cluster, startCluster } from "../testing/cluster.ts";
import { GrpcRunClient } from "../testing/grpc-run-client.ts";
import { textReply } from "../testing/openai-stub.ts";
import { createRunWatch, type RunWatch } from "../testing/run-watch.ts";
import { tarOf } from "../testing/tar.ts";

const LEASE_TTL_MS = 3000;
/** A retry may wait out the dead server's idempotency claim (STALE_CLAIM_MS, 30 s). */
const RETRY_CAP_MS = 180_000;

let c: Cluster;
let w: RunWatch;
let workspaceTar: Uint8Array;
const extra: AgentdProcess[] = [];
/** label value → the run the retry answered. */
const created = new Map<string, string>();

/** The queue knows the run: claimable, or waiting for a tenant slot (--tenant-limit). */
async function assertQueued(runId: string): Promise<void> {
  const state = await c.queue.stateOf(runId);
  assert.ok(state === "ready" || state === "waiting", `run ${runId} is queued (${state})`);
}

before(async () => {
  c = await startCluster({
    workers: 0,
    leaseTtlMs: LEASE_TTL_MS,
    script: () => ({ chunks: textReply(["done"]) }),
  });
  w = createRunWatch(c);
  workspaceTar = await tarOf([{ name: "a.txt", data: "a\n" }]);
});
after(async () => {
  await Promise.allSettled(extra.map((p) => p.kill()));
  await c?.stop();
});

const request = (key: string, label: string) => ({
  prompt: `create-${label}`,
  workspaceTar,
  idempotencyKey: key,
  labels: { fault: label },
});

/** The runs labelled `fault=label`, as ListRuns answers them. */
async function runsLabelled(label: string): Promise<string[]> {
  const res = await c.client.listRuns({ labelSelector: `fault=${label}`, pageSize: 50 });
  return res.runs.map((r) => r.runId);
}

/** Retries CreateRun with the key on the cluster's own server until it answers a run. */
async function retry(key: string, label: string): Promise<string> {
  const runId = await w.until(
    `the retry of key ${key} to answer a run`,
    async () => (await c.client.createRun(request(key, label))).run?.runId,
    RETRY_CAP_MS,
  );
  created.set(label, runId);
  c.track(runId);
  return runId;
}

function crashingServer(point: string): Promise<AgentdProcess> {
  const flags = [
    "--event-log",
    c.redis.url,
    "--artifact-dir",
    c.artifactDir,
    "--policy",
    c.policyFile,
    "--lease-ttl-ms",
    String(LEASE_TTL_MS),
    "--insecure-no-auth",
  ];
  return startAgentd("server", flags, { env: { AGENTD_TEST_CRASH_AT: point } }).then((p) => {
    extra.push(p);
    return p;
  });
}

for (const [point, label] of [
  ["createRun.afterClaim", "after-claim"],
  ["createRun.afterAdmit", "after-admit"],
] as const) {
  it(`server SIGKILLed at ${point}: the retry with the key gets a run that is queued`, {
    timeout: RETRY_CAP_MS + 60_000,
  }, async () => {
    const s = await crashingServer(point);
    const client = new GrpcRunClient(s.addr);
    const key = `k-${ulid()}`;
    await assert.rejects(client.createRun(request(key, label)), "the dying server answers nothing");
    client.close();
    const exit = await s.exited;
    assert.equal(exit.signal, "SIGKILL", `the server died at ${point}\n${s.output()}`);
    const left = await runsLabelled(label);
    if (point === "createRun.afterClaim") assert.deepEqual(left, [], "no run was stored");
    else {
      assert.equal(left.length, 1, "the run was stored");
      await assertQueued(left[0] as string); // and queued, in the same step
    }
    const runId = await retry(key, label);
    if (point === "createRun.afterAdmit")
      assert.equal(runId, left[0], "the retry answers the stored run");
    await assertQueued(runId);
  });
}

it("a run stranded in the log without a queue record is queued by the retry with its key", {
  timeout: 120_000,
}, async () => {
  const key = `k-${ulid()}`;
  const label = "stranded";
  const { run } = await c.client.createRun(request(key, label));
  const runId = run?.runId as string;
  // What a server before RunAdmission left when it died between append and enqueue: the
  // log says queued, the queue does not know the run.
  assert.equal(await c.queue.cancelQueued(runId), true);
  await c.redis.client().del(schedulerKeys("agentd:").record(runId));
  assert.equal(await c.queue.stateOf(runId), undefined, "the queue does not know the run");
  assert.equal((await c.client.getRun(runId)).run?.state, RunState.QUEUED);
  assert.equal(await retry(key, label), runId, "the retry answers the same run");
  await assertQueued(runId); // the queue knows it again
  const state = await c.queue.stateOf(runId);
  // A second retry changes nothing (enqueue is idempotent).
  await c.client.createRun(request(key, label));
  assert.equal(await c.queue.stateOf(runId), state);
});

it("10 parallel creators on a server that dies mid-way: every key's retry gets one run", {
  timeout: RETRY_CAP_MS + 120_000,
}, async () => {
  const s = await crashingServer("createRun.afterAdmit");
  const client = new GrpcRunClient(s.addr);
  const keys = Array.from({ length: 10 }, (_, i) => ({
    key: `k-${ulid()}`,
    label: `parallel-${i}`,
  }));
  // The first request to store its run kills the server: every request is left somewhere
  // between nothing done, its key claimed and its run stored.
  const answers = await Promise.allSettled(
    keys.map((k) => client.createRun(request(k.key, k.label))),
  );
  client.close();
  assert.equal((await s.exited).signal, "SIGKILL", s.output());
  assert.ok(
    answers.every((a) => a.status === "rejected"),
    "no request was answered",
  );
  const runIds = await Promise.all(keys.map((k) => retry(k.key, k.label)));
  assert.equal(new Set(runIds).size, keys.length, "one run per key");
  for (const runId of runIds) await assertQueued(runId);
});

/** The newest incremental AOF file of the cluster's Redis (Redis 7 multi-part AOF). */
function incrAof(): string {
  const dir = join(c.redis.dir, "appendonlydir");
  const files = readdirSync(dir)
    .filter((f) => f.endsWith(".incr.aof"))
    .sort((a, b) => Number(/\.(\d+)\.incr/.exec(a)?.[1]) - Number(/\.(\d+)\.incr/.exec(b)?.[1]));
  assert.ok(files.length > 0, `an incremental AOF in ${dir}`);
  return join(dir, files[files.length - 1] as string);
}

/**
 * Cuts the AOF inside the transaction that admitted `runId`, between the run's event and
 * its queue record, and repairs it as an operator would (redis-check-aof --fix).
 */
function cutInsideAdmission(runId: string): void {
  const file = incrAof();
  const aof = readFileSync(file);
  const event = aof.indexOf(`run:${runId}:events`);
  assert.ok(event > 0, "the run's event is in the AOF");
  const begin = aof.lastIndexOf("MULTI\r\n", event);
  const end = aof.indexOf("EXEC\r\n", event);
  const queueRecord = aof.indexOf(`queue:run:${runId}`, event);
  assert.ok(begin > 0 && end > begin, "the admission is one MULTI/EXEC in the AOF");
  assert.ok(
    queueRecord > event && queueRecord < end,
    "its queue record is in the same transaction",
  );
  truncateSync(file, queueRecord);
  execFileSync("redis-check-aof", ["--fix", file], {
    input: "y\n",
    stdio: ["pipe", "ignore", "ignore"],
  });
}

it("an AOF cut inside the admission: the run is in neither log nor queue, and the retry creates it", {
  timeout: RETRY_CAP_MS + 60_000,
}, async () => {
  const key = `k-${ulid()}`;
  const label = "aof-cut";
  const { run } = await c.client.createRun(request(key, label));
  const lost = run?.runId as string;
  await c.redis.restart({ hard: true, whileDown: () => cutInsideAdmission(lost) });
  const head = await w.until("Redis back after the cut", async () => ({
    h: await c.log.head(lost),
  }));
  assert.equal(head.h, undefined, "the run's event went with the transaction");
  assert.equal(await c.queue.stateOf(lost), undefined, "and so did its queue record");
  const runId = await retry(key, label);
  assert.notEqual(runId, lost, "the retry created the run again");
  await assertQueued(runId);
});

it("a worker then drives every one of those runs to COMPLETED, one run per key", {
  timeout: 300_000,
}, async () => {
  await c.startWorker();
  assert.equal(created.size, 14, "every earlier case answered a run");
  for (const [label, runId] of created) {
    const run = await w.waitTerminal(runId, 240_000);
    assert.equal(run.state, RunState.COMPLETED, `${label}: ${run.error?.message ?? ""}`);
    assert.deepEqual(await runsLabelled(label), [runId], `${label}: exactly one run for the key`);
  }
});
