#!/usr/bin/env node
/**
 * The cost of the instrumentation: `node bench/observability.ts [--rounds N] [--runs N]`
 * (what `make bench` runs; never run by the tests). In one run, alternating, in child
 * processes (the OpenTelemetry SDK is process-wide):
 *
 *   kernel  bench/kernel.ts off (decisions only) and on (AGENTD_BENCH_TELEMETRY=1: each
 *           decision inside its execute_tool span with the kernel.decide child, exported
 *           over OTLP/HTTP to a local receiver, plus the event metrics): decision p99.
 *   e2e     bench/e2e.ts off and on (the event log instrumented as `agentd` does it, and
 *           tracing exported to the same receiver): wall time and agentd's overhead.
 *
 * The raw baseline is the "off" side of each pair. Target: on ≤ 1.05 × off (5% extra).
 * The metric counters inlined in the driver (model steps, sandbox starts) count in both.
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { startOtlpReceiver } from "../internal/testing/otlp-receiver.ts";

const TARGET = 1.05;
const ROOT = fileURLToPath(new URL("..", import.meta.url));

function run(
  script: string,
  args: string[],
  env: Record<string, string>,
): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [script, ...args],
      { cwd: ROOT, env: { ...process.env, ...env }, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err) return reject(new Error(`${script} failed: ${stderr || err.message}`));
        const last = stdout
          .trim()
          .split("\n")
          .filter((l) => l.startsWith("{"))
          .at(-1);
        if (last === undefined) return reject(new Error(`${script} printed no JSON`));
        resolve(JSON.parse(last) as Record<string, unknown>);
      },
    );
  });
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)] as number;
};

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: { rounds: { type: "string", default: "3" }, runs: { type: "string", default: "3" } },
  });
  const rounds = Number(values.rounds);
  const runs = Number(values.runs);
  const otlp = await startOtlpReceiver();
  const on = {
    AGENTD_BENCH_TELEMETRY: "1",
    OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
  };
  const off = { AGENTD_BENCH_TELEMETRY: "0" };
  const k = { off: [] as number[], on: [] as number[] };
  const e = {
    offWall: [] as number[],
    onWall: [] as number[],
    offOver: [] as number[],
    onOver: [] as number[],
  };
  try {
    process.stdout.write(
      `bench/observability: ${rounds} rounds, off and on alternating; OTLP receiver ${otlp.url}\n`,
    );
    for (let i = 0; i < rounds; i++) {
      k.off.push(Number((await run("bench/kernel.ts", [], off)).p99Ms));
      k.on.push(Number((await run("bench/kernel.ts", [], on)).p99Ms));
      const eOff = (await run("bench/e2e.ts", ["--runs", String(runs)], off)).median as Record<
        string,
        number
      >;
      const eOn = (await run("bench/e2e.ts", ["--runs", String(runs)], on)).median as Record<
        string,
        number
      >;
      e.offWall.push(eOff.wallMs as number);
      e.onWall.push(eOn.wallMs as number);
      e.offOver.push(eOff.overheadMs as number);
      e.onOver.push(eOn.overheadMs as number);
      process.stdout.write(
        `  round ${i + 1}: kernel p99 ${(1000 * (k.off.at(-1) as number)).toFixed(1)} → ${(1000 * (k.on.at(-1) as number)).toFixed(1)} µs; e2e wall ${eOff.wallMs?.toFixed(0)} → ${eOn.wallMs?.toFixed(0)} ms, overhead ${eOff.overheadMs?.toFixed(0)} → ${eOn.overheadMs?.toFixed(0)} ms\n`,
      );
    }
  } finally {
    await otlp.close();
  }
  const kRatio = median(k.on) / median(k.off);
  const wallRatio = median(e.onWall) / median(e.offWall);
  const spans = otlp.spans.length;
  const line = (name: string, a: string, b: string, r: number) =>
    `  ${name.padEnd(30)} off ${a.padStart(10)}   on ${b.padStart(10)}   ${r.toFixed(3)}x (target <= ${TARGET}x): ${r <= TARGET ? "met" : "MISSED"}\n`;
  process.stdout.write(
    line(
      "kernel decision p99",
      `${(1000 * median(k.off)).toFixed(1)} µs`,
      `${(1000 * median(k.on)).toFixed(1)} µs`,
      kRatio,
    ) +
      line(
        "e2e wall (median)",
        `${median(e.offWall).toFixed(0)} ms`,
        `${median(e.onWall).toFixed(0)} ms`,
        wallRatio,
      ) +
      `  e2e agentd overhead (median)   off ${median(e.offOver).toFixed(0)} ms   on ${median(e.onOver).toFixed(0)} ms (+${(median(e.onOver) - median(e.offOver)).toFixed(0)} ms)\n` +
      `  spans received by the OTLP receiver: ${spans}\n`,
  );
  process.stdout.write(
    `${JSON.stringify({ bench: "observability", kernel: k, e2e: e, kernelP99Ratio: kRatio, e2eWallRatio: wallRatio, spans, target: TARGET })}\n`,
  );
  return spans > 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`bench/observability: ${(err as Error).message}\n`);
    process.exit(1);
  },
);
