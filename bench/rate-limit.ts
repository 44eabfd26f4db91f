#!/usr/bin/env node
/**
 * The per-token rate limiter's cost per RPC: `node bench/rate-limit.ts [--rounds N]
 * [--calls N]` (what `make bench` runs; never run by the tests). One real `agentd server`
 * (file event log, one queued run), two tokens of one tenant: `limited` has a rate it never
 * reaches (1,000,000/s), so every call takes from its bucket; `unlimited` has none (and the
 * server no --rate-limit), so the gate returns at once. Rounds alternate between the two,
 * each round `--calls` GetRuns per token one after another over gRPC (HTTP/2, one connection
 * per token), alternating tokens call by call, then the same with 16 in flight. The figure
 * is the ratio of the median per-call latencies, limited / unlimited, in this one run. Target: ≤ 1.05 (5%).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { RunService } from "../internal/gen/agentd/v1/run_service_pb.js";
import { sha256Hex, startAgentd } from "../internal/testing/agentd-process.ts";

const TARGET = 1.05;

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)] as number;
};

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      rounds: { type: "string", default: "15" },
      calls: { type: "string", default: "400" },
    },
  });
  const rounds = Number(values.rounds);
  const calls = Number(values.calls);
  if (!(rounds >= 1 && calls >= 1)) {
    process.stderr.write("usage: node bench/rate-limit.ts [--rounds N] [--calls N]\n");
    return 2;
  }
  const dir = mkdtempSync(join(tmpdir(), "agentd-bench-ratelimit-"));
  const auth = join(dir, "auth.yaml");
  writeFileSync(
    auth,
    `tokens:
  - { sha256: ${sha256Hex("limited")}, tenant: acme, roles: [submit, read], rate: { perSecond: 1000000, burst: 1000000 } }
  - { sha256: ${sha256Hex("unlimited")}, tenant: acme, roles: [submit, read] }
`,
  );
  const server = await startAgentd("server", [
    "--event-log",
    `file:${join(dir, "log")}`,
    "--artifact-dir",
    join(dir, "artifacts"),
    "--auth-file",
    auth,
  ]);
  try {
    const clients = {
      limited: createClient(RunService, createGrpcTransport({ baseUrl: server.url })),
      unlimited: createClient(RunService, createGrpcTransport({ baseUrl: server.url })),
    };
    const headers = (t: string) => ({ headers: { authorization: `Bearer ${t}` } });
    const { run } = await clients.limited.createRun({ prompt: "bench" }, headers("limited"));
    const runId = run?.runId as string;
    const get = (t: "limited" | "unlimited") => clients[t].getRun({ runId }, headers(t));
    // Warm both paths (JIT, connections) before anything is timed.
    for (let i = 0; i < 300; i++) {
      await get("limited");
      await get("unlimited");
    }
    // Per call, alternating tokens call by call: drift on a shared machine (other
    // processes, GC) hits both sides alike. Medians of the per-call latencies.
    const seq: Record<string, number[]> = { limited: [], unlimited: [] };
    const par: Record<string, number[]> = { limited: [], unlimited: [] };
    const timed = async (t: "limited" | "unlimited", into: Record<string, number[]>) => {
      const t0 = performance.now();
      await get(t);
      into[t]?.push(performance.now() - t0);
    };
    for (let r = 0; r < rounds; r++) {
      for (let i = 0; i < calls; i++) {
        const first = (i + r) % 2 === 0 ? "limited" : "unlimited";
        await timed(first, seq);
        await timed(first === "limited" ? "unlimited" : "limited", seq);
      }
      let next = 0;
      await Promise.all(
        Array.from({ length: 16 }, async (_, w) => {
          // Each of the 16 alternates on its own: half of them in flight for each token.
          for (let k = w; next++ < calls * 2; k++)
            await timed(k % 2 === 0 ? "limited" : "unlimited", par);
        }),
      );
    }
    const fig = (m: Record<string, number[]>) => {
      const lim = median(m.limited ?? []);
      const unl = median(m.unlimited ?? []);
      return { limitedUs: lim * 1000, unlimitedUs: unl * 1000, ratio: lim / unl };
    };
    const sequential = fig(seq);
    const concurrent = fig(par);
    const row = (name: string, f: ReturnType<typeof fig>) =>
      `${name.padEnd(14)} ${f.unlimitedUs.toFixed(1).padStart(10)} ${f.limitedUs.toFixed(1).padStart(10)} ${f.ratio.toFixed(3).padStart(7)}  ${f.ratio <= TARGET ? "ok" : "MISSED"} (≤ ${TARGET})`;
    process.stdout.write(
      `GetRun over gRPC, µs per call (median of ${rounds} rounds × ${calls} calls per token)\n` +
        `${"".padEnd(14)} ${"unlimited".padStart(10)} ${"limited".padStart(10)} ${"ratio".padStart(7)}\n` +
        `${row("sequential", sequential)}\n${row("16 in flight", concurrent)}\n`,
    );
    process.stdout.write(
      `${JSON.stringify({
        bench: "rate-limit",
        rounds,
        calls,
        sequential,
        concurrent,
        targets: {
          sequentialRatio: sequential.ratio <= TARGET,
          concurrentRatio: concurrent.ratio <= TARGET,
        },
      })}\n`,
    );
    return 0;
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

process.exitCode = await main();
