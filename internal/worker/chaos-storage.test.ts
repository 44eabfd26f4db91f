/**
 * Storage errors back off, against real processes: Redis runs out of memory (maxmemory,
 * noeviction) in the middle of a run driven by two workers. While it is full, the workers
 * must not spin: a bounded number of log lines, a bounded number of epoch bumps for the
 * run (each takeover bumps it). Once memory is back, the run completes, healthy.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { schedulerKeys } from "../scheduler/redis-keys.ts";
import { type Cluster, startCluster } from "../testing/cluster.ts";
import {
  type StubReply,
  type StubRequest,
  textReply,
  toolCallsReply,
} from "../testing/openai-stub.ts";
import { createRunWatch, type RunWatch } from "../testing/run-watch.ts";

const LEASE_TTL_MS = 3000;
const OUTAGE_MS = 12_000;

function model({ body }: StubRequest): StubReply {
  const messages = (body?.messages ?? []) as { role: string }[];
  const n = messages.filter((m) => m.role === "tool").length;
  if (n < 4)
    return {
      chunks: toolCallsReply([
        {
          id: `call_${n + 1}`,
          name: "process_run",
          arguments: JSON.stringify({ command: "sleep 1" }),
        },
      ]),
    };
  return { chunks: textReply(["slept"]) };
}

let c: Cluster;
let w: RunWatch;
before(async () => {
  c = await startCluster({ workers: 2, leaseTtlMs: LEASE_TTL_MS, script: model });
  w = createRunWatch(c);
});
after(async () => {
  await c?.stop();
});

it("Redis out of memory: workers back off (few log lines, few takeovers), then the run completes", {
  timeout: 120_000,
}, async (t) => {
  const s = await w.submit("oom");
  await w.waitEvent(s, "toolCall");
  const redis = c.redis.client();
  const epochOf = async () =>
    Number(await redis.hget(schedulerKeys("agentd:").meta(s.runId), "epoch"));
  const epochBefore = await epochOf();
  const linesBefore = c.workers.map((p) => p.output().split("\n").length);
  // Full: 8 MB of padding, then a limit below what is used; with noeviction every write
  // that may grow memory is refused.
  const pad = "x".repeat(256 * 1024);
  for (let i = 0; i < 32; i++) await redis.set(`oom:pad:${i}`, pad);
  await redis.config("SET", "maxmemory-policy", "noeviction");
  const used = Number(/used_memory:(\d+)/.exec(await redis.info("memory"))?.[1]);
  await redis.config("SET", "maxmemory", String(used - 4 * 1024 * 1024));
  await assert.rejects(redis.set("oom:probe", "x"), /OOM/, "Redis refuses writes");
  await new Promise((r) => setTimeout(r, OUTAGE_MS));
  const epochDuring = await epochOf();
  const lines = c.workers.map((p, i) => p.output().split("\n").length - (linesBefore[i] ?? 0));
  // Memory back.
  await redis.config("SET", "maxmemory", "0");
  for (let i = 0; i < 32; i++) await redis.del(`oom:pad:${i}`);
  await w.assertHealthy(s.runId);

  t.diagnostic(
    `outage ${OUTAGE_MS} ms: log lines per worker ${lines.join(", ")}; epoch ${epochBefore} → ${epochDuring}`,
  );
  const said = c.workers.map((p) => p.output()).join("\n");
  assert.match(
    said,
    /lease is left to expire|backing off/,
    `the outage reached the workers:\n${said.split("\n").slice(-12).join("\n")}`,
  );
  // Without backoff: ~65 claim/fail cycles a second per worker and an epoch per cycle.
  const perSecond = lines.map((n) => n / (OUTAGE_MS / 1000));
  assert.ok(
    perSecond.every((r) => r < 3),
    `log lines per second per worker during the outage: ${perSecond.map((r) => r.toFixed(1)).join(", ")}\n${c.diagnostics(40)}`,
  );
  assert.ok(
    epochDuring - epochBefore <= Math.ceil(OUTAGE_MS / LEASE_TTL_MS) + 1,
    `the run's epoch went from ${epochBefore} to ${epochDuring} in ${OUTAGE_MS} ms`,
  );
});
