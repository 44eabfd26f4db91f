#!/usr/bin/env node
/**
 * CreateRun across a Redis Sentinel failover: `node bench/redis-failover.ts [--writers N]`
 * (never run by the tests). A primary, two replicas and three redis-sentinel processes
 * (internal/testing), an ACL user, the connection factory's redis+sentinel:// client and
 * --redis-min-replicas-acked 1 (WAIT 1). N writers call CreateRun (the in-process RPC
 * with the server's RunAdmission) and N others append to runs of their own, continuously:
 *
 *   1. steady state for a while: CreateRun latencies "without" a failover;
 *   2. the primary SIGKILLed: Sentinel promotes a replica; the CreateRuns in flight at
 *      some moment between the kill and the first acknowledged append form "during",
 *      those of the 5 s after it "after";
 *   3. the time from the primary's death to the first acknowledged append (and CreateRun).
 *
 * A CreateRun that fails is retried (the failures are counted); its latency is the time
 * until the client got its run. Prints a table and one JSON line. Exit 1 when an
 * acknowledged run or event is missing from the new primary.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient, createRouterTransport, type Interceptor } from "@connectrpc/connect";
import { kPrincipal } from "../internal/api/context.ts";
import type { ApiDeps } from "../internal/api/deps.ts";
import { registerRunService } from "../internal/api/routes.ts";
import { FsArtifactStore } from "../internal/artifacts/fs-artifact-store.ts";
import { delta } from "../internal/eventlog/conformance.ts";
import { RedisEventLog } from "../internal/eventlog/redis-event-log.ts";
import { RunService } from "../internal/gen/agentd/v1/run_service_pb.js";
import { RedisIdempotencyStore } from "../internal/idempotency/redis-idempotency.ts";
import { RunProjectionCache } from "../internal/projections/run-cache.ts";
import { connectRedis, createRedisClient } from "../internal/redisconn/connect.ts";
import { parseRedisUrl } from "../internal/redisconn/redis-url.ts";
import { RedisRunAdmission } from "../internal/scheduler/redis-run-admission.ts";
import { RedisRunQueue } from "../internal/scheduler/redis-run-queue.ts";
import { startSentinels } from "../internal/testing/redis-sentinel.ts";
import { startRedis } from "../internal/testing/redis-server.ts";

const args = process.argv.slice(2);
const at = args.indexOf("--writers");
const WRITERS = at >= 0 ? Number(args[at + 1]) : 4;
if (!Number.isInteger(WRITERS) || WRITERS < 1 || WRITERS > 64) {
  process.stderr.write("usage: node bench/redis-failover.ts [--writers 1..64]\n");
  process.exit(2);
}
const WARMUP_MS = 2000;
const STEADY_MS = 10_000;
const AFTER_MS = 5000;
const USER = { name: "agentd", password: "bench-failover-pw" };
const WAIT = { minReplicas: 1, timeoutMs: 2000 };

const primary = await startRedis({ user: USER, appendfsync: "everysec" });
const replicas = [
  await startRedis({ user: USER, appendfsync: "everysec", replicaOf: primary.port }),
  await startRedis({ user: USER, appendfsync: "everysec", replicaOf: primary.port }),
];
const sentinels = await startSentinels({ primaryPort: primary.port, user: USER });
await sentinels.waitForReplicas(2);
const dir = mkdtempSync(join(tmpdir(), "agentd-bench-failover-"));

const target = parseRedisUrl(sentinels.url, { password: USER.password });
const client = createRedisClient(target, { enableAutoPipelining: true, commandTimeout: 5000 });
client.on("error", () => undefined);
await connectRedis(client, target);
const log = new RedisEventLog({ client, replicaWait: WAIT });
const deps: ApiDeps = {
  log,
  runs: new RunProjectionCache({ log }),
  artifacts: new FsArtifactStore(join(dir, "artifacts")),
  queue: new RedisRunQueue({ client, tenantLimit: 1_000_000 }),
  admission: new RedisRunAdmission({ client, tenantLimit: 1_000_000, replicaWait: WAIT }),
  idempotency: new RedisIdempotencyStore({ client }),
};
const principal: Interceptor = (next) => async (req) => {
  req.contextValues.set(kPrincipal, {
    name: "bench",
    tenantId: "bench",
    roles: new Set(["submit", "read"] as const),
  });
  return next(req);
};
const rpc = createClient(
  RunService,
  createRouterTransport((router) => registerRunService(router, deps), {
    router: { interceptors: [principal] },
  }),
);

interface Sample {
  start: number;
  ms: number;
}
const creates: Sample[] = [];
const acked = new Map<string, string[]>(); // run → acknowledged events' JSON, by seq - 1
let failures = 0;
let killedAt = 0;
let firstAppendAfterKill = 0;
let firstCreateAfterKill = 0;
let stop = false;

async function createRun(w: number, i: number): Promise<string> {
  const start = performance.now();
  const key = `w${w}-${i}`;
  for (;;) {
    try {
      // The same idempotency key on every retry: one run, however many tries.
      const res = await rpc.createRun({ prompt: "bench", idempotencyKey: key });
      const id = res.run?.runId ?? "";
      const end = performance.now();
      creates.push({ start, ms: end - start });
      if (killedAt > 0 && firstCreateAfterKill === 0 && start > killedAt)
        firstCreateAfterKill = end;
      return id;
    } catch {
      failures++;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/** CreateRun after CreateRun: its latency is what this bench is about. */
async function creator(w: number): Promise<void> {
  for (let i = 0; !stop; i++) {
    const runId = await createRun(w, i);
    acked.set(
      runId,
      (await log.read(runId, 0)).map((e) => e.json),
    );
  }
}

/** Appends to one run of its own, continuously (the workers' side of the load). */
async function appender(w: number): Promise<void> {
  const runId = await createRun(1000 + w, 0);
  const events = (await log.read(runId, 0)).map((e) => e.json);
  acked.set(runId, events);
  for (let i = 0; !stop; i++) {
    try {
      const sent = performance.now();
      const ev = await log.append(delta(runId, `w${w} ${i}`));
      events[ev.seq - 1] = ev.json;
      if (killedAt > 0 && firstAppendAfterKill === 0 && sent > killedAt)
        firstAppendAfterKill = performance.now();
    } catch {
      failures++;
    }
  }
}

const benchStart = performance.now();
const writers = [
  ...Array.from({ length: WRITERS }, (_, w) => creator(w)),
  ...Array.from({ length: WRITERS }, (_, w) => appender(w)),
];
await new Promise((r) => setTimeout(r, STEADY_MS));
killedAt = performance.now();
await primary.kill();
while (firstAppendAfterKill === 0 || performance.now() < firstAppendAfterKill + AFTER_MS)
  await new Promise((r) => setTimeout(r, 100));
stop = true;
await Promise.all(writers);

// Every acknowledged run and event is on the new primary.
let missing = 0;
let checked = 0;
for (const [runId, events] of acked) {
  const stored = await log.read(runId, 0);
  events.forEach((json, i) => {
    if (json === undefined) return;
    checked++;
    if (stored[i]?.json !== json) missing++;
  });
}
const newPrimary = await sentinels.primaryPort();

const p = (xs: number[], q: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? Number.NaN;
};
// Without: the steady state before the kill, after a warm-up. During: every CreateRun in
// flight at some moment between the kill and the first acknowledged append (the outage).
// After: those started in the AFTER_MS past it (the new primary with one replica).
const recovered = firstAppendAfterKill;
const without = creates
  .filter((s) => s.start > benchStart + WARMUP_MS && s.start + s.ms < killedAt)
  .map((s) => s.ms);
const during = creates
  .filter((s) => s.start + s.ms >= killedAt && s.start <= recovered)
  .map((s) => s.ms);
const afterwards = creates.filter((s) => s.start > recovered).map((s) => s.ms);
const slow = creates
  .filter((s) => s.ms > 1000)
  .map((s) => `${((s.start - benchStart) / 1000).toFixed(1)}s:${s.ms.toFixed(0)}ms`);
const row = (name: string, xs: number[]) =>
  `${name.padEnd(30)} n=${String(xs.length).padStart(5)}  p50 ${p(xs, 0.5).toFixed(1).padStart(8)} ms  p99 ${p(xs, 0.99).toFixed(1).padStart(8)} ms  max ${Math.max(
    ...xs,
  )
    .toFixed(1)
    .padStart(8)} ms`;
const result = {
  bench: "redis-failover",
  writers: WRITERS,
  createRunWithout: { n: without.length, p50: p(without, 0.5), p99: p(without, 0.99) },
  createRunDuring: { n: during.length, p50: p(during, 0.5), p99: p(during, 0.99) },
  createRunAfter: { n: afterwards.length, p50: p(afterwards, 0.5), p99: p(afterwards, 0.99) },
  p99Ratio: p(during, 0.99) / p(without, 0.99),
  deathToFirstAppendMs: firstAppendAfterKill - killedAt,
  deathToFirstCreateRunMs: firstCreateAfterKill - killedAt,
  failedCalls: failures,
  acknowledgedEventsChecked: checked,
  acknowledgedEventsMissing: missing,
  promoted: replicas.some((r) => r.port === newPrimary),
};
console.log("CreateRun across a Sentinel failover (WAIT 1, 2 replicas, 3 sentinels)");
console.log(row("CreateRun without failover", without));
console.log(row("CreateRun during failover", during));
console.log(row("CreateRun after (new primary)", afterwards));
console.log(`p99 during / without: ${result.p99Ratio.toFixed(1)}x`);
console.log(
  `primary's death → first acknowledged append:   ${result.deathToFirstAppendMs.toFixed(0)} ms`,
);
console.log(
  `primary's death → first acknowledged CreateRun: ${result.deathToFirstCreateRunMs.toFixed(0)} ms`,
);
console.log(
  `failed calls (retried): ${failures}; acknowledged events checked ${checked}, missing ${missing}`,
);
console.log(`CreateRuns over 1 s (start since the bench began: duration): ${slow.join(" ")}`);
console.log(`the kill at ${((killedAt - benchStart) / 1000).toFixed(1)}s`);
console.log(JSON.stringify(result));

await log.close();
client.disconnect();
await sentinels.stop();
for (const r of replicas) await r.stop();
await primary.stop();
rmSync(dir, { recursive: true, force: true });
process.exit(missing === 0 && result.promoted ? 0 : 1);
