#!/usr/bin/env node
/**
 * CreateRun latency: `node bench/create-run.ts [--samples N]` (never run by the tests).
 * Against one private redis-server (AOF on, appendfsync everysec), samples interleaved:
 *
 *  (a) the RPC: CreateRun through connect's in-process router, with the server's
 *      RunAdmission (run.queued and the queue record in one script) vs without one (the
 *      previous sequence: append run.queued, then enqueue, two round trips);
 *  (b) the storage step alone: RedisRunAdmission.admit vs RedisEventLog.append followed by
 *      RedisRunQueue.enqueue.
 *
 * Prints a table and one JSON line; the target (issue #26) is new p50 ≤ 1.1x previous p50.
 * Exit 1 when a created run is not both in the log and in the queue; a missed target is
 * reported, not fatal.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient, createRouterTransport, type Interceptor } from "@connectrpc/connect";
import { ulid } from "ulid";
import { kPrincipal } from "../internal/api/context.ts";
import type { ApiDeps } from "../internal/api/deps.ts";
import { registerRunService } from "../internal/api/routes.ts";
import { FsArtifactStore } from "../internal/artifacts/fs-artifact-store.ts";
import { queued } from "../internal/eventlog/conformance.ts";
import { RedisEventLog } from "../internal/eventlog/redis-event-log.ts";
import { RunService } from "../internal/gen/agentd/v1/run_service_pb.js";
import { RunProjectionCache } from "../internal/projections/run-cache.ts";
import { RedisRunAdmission } from "../internal/scheduler/redis-run-admission.ts";
import { RedisRunQueue } from "../internal/scheduler/redis-run-queue.ts";
import { startRedis } from "../internal/testing/redis-server.ts";

const args = process.argv.slice(2);
const at = args.indexOf("--samples");
const SAMPLES = at >= 0 ? Number(args[at + 1]) : 500;
if (!Number.isInteger(SAMPLES) || SAMPLES < 20) {
  process.stderr.write("usage: node bench/create-run.ts [--samples N>=20]\n");
  process.exit(2);
}
const WARMUP = 50;
const TENANT = "bench";

const redis = await startRedis({ appendfsync: "everysec" });
const dir = mkdtempSync(join(tmpdir(), "agentd-bench-create-"));
const client = redis.client();
const log = new RedisEventLog({ client });
const queue = new RedisRunQueue({ client, tenantLimit: 1_000_000 });
const admission = new RedisRunAdmission({ client, tenantLimit: 1_000_000 });
const base: ApiDeps = {
  log,
  runs: new RunProjectionCache({ log }),
  artifacts: new FsArtifactStore(join(dir, "artifacts")),
  queue,
};
const principal: Interceptor = (next) => async (req) => {
  req.contextValues.set(kPrincipal, {
    name: "bench",
    tenantId: TENANT,
    roles: new Set(["submit", "read"] as const),
  });
  return next(req);
};
const rpcOf = (deps: ApiDeps) =>
  createClient(
    RunService,
    createRouterTransport((router) => registerRunService(router, deps), {
      router: { interceptors: [principal] },
    }),
  );
const rpcNew = rpcOf({ ...base, admission });
const rpcOld = rpcOf(base);

const p = (xs: number[], q: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] as number;
};
const timed = async (f: () => Promise<unknown>): Promise<number> => {
  const t = performance.now();
  await f();
  return performance.now() - t;
};

let bad = 0;
const created: string[] = [];
/** Interleaved samples of two ways; the first WARMUP of each are dropped. */
async function compare(
  fresh: () => Promise<string>,
  previous: () => Promise<string>,
): Promise<{ fresh: number[]; previous: number[] }> {
  const out = { fresh: [] as number[], previous: [] as number[] };
  for (let i = 0; i < SAMPLES + WARMUP; i++) {
    let id = "";
    const a = await timed(async () => {
      id = await fresh();
    });
    created.push(id);
    let id2 = "";
    const b = await timed(async () => {
      id2 = await previous();
    });
    created.push(id2);
    if (i >= WARMUP) {
      out.fresh.push(a);
      out.previous.push(b);
    }
  }
  return out;
}

const prompt = "x".repeat(200);
const rpc = await compare(
  async () => (await rpcNew.createRun({ prompt })).run?.runId ?? "",
  async () => (await rpcOld.createRun({ prompt })).run?.runId ?? "",
);
const storage = await compare(
  async () => {
    const runId = ulid();
    await admission.admit({
      first: { ...queued(runId, TENANT, runId), tenantId: TENANT },
      priority: 5,
    });
    return runId;
  },
  async () => {
    const runId = ulid();
    await log.append({ ...queued(runId, TENANT, runId), expectedSeq: 0 });
    await queue.enqueue({ runId, tenantId: TENANT, sessionId: runId, priority: 5 });
    return runId;
  },
);

// Every run made is in the log and in the queue.
for (const runId of created.slice(0, 200)) {
  const [head, state] = await Promise.all([log.head(runId), queue.stateOf(runId)]);
  if (head?.seq !== 1 || state === undefined) bad++;
}

const row = (name: string, r: { fresh: number[]; previous: number[] }) => {
  const ratio = p(r.fresh, 0.5) / p(r.previous, 0.5);
  process.stdout.write(
    `${name.padEnd(10)} new p50 ${p(r.fresh, 0.5).toFixed(3)} ms  p99 ${p(r.fresh, 0.99).toFixed(3)} ms | previous p50 ${p(r.previous, 0.5).toFixed(3)} ms  p99 ${p(r.previous, 0.99).toFixed(3)} ms | ratio ${ratio.toFixed(3)} ${ratio <= 1.1 ? "ok" : "MISSED"} (target <= 1.1)\n`,
  );
  return {
    newP50Ms: p(r.fresh, 0.5),
    newP99Ms: p(r.fresh, 0.99),
    previousP50Ms: p(r.previous, 0.5),
    previousP99Ms: p(r.previous, 0.99),
    ratioP50: ratio,
  };
};
process.stdout.write(`CreateRun, ${SAMPLES} samples each, interleaved (Redis AOF everysec)\n`);
const figures = { rpc: row("(a) rpc", rpc), storage: row("(b) store", storage) };
process.stdout.write(
  `${JSON.stringify({
    bench: "create-run",
    samples: SAMPLES,
    ...figures,
    targets: { rpcP50Ratio: figures.rpc.ratioP50 <= 1.1 },
    checked: created.slice(0, 200).length,
    bad,
  })}\n`,
);
await queue.close();
await log.close();
await redis.stop();
rmSync(dir, { recursive: true, force: true });
if (bad > 0) {
  process.stderr.write(`${bad} created runs were not both in the log and the queue\n`);
  process.exit(1);
}
