#!/usr/bin/env node
/**
 * What the execution-start record costs: `node bench/tool-started.ts [--calls N] [--rounds N]
 * [--fsync always|everysec]` (what `make bench` runs; never run by the tests). Issue #26's
 * target: the `tool.started` record adds <= 5% to process.run p50.
 *
 * Both sides are the same kernel path on the same private redis-server (RedisEventLog with
 * auto-pipelining, as cmd/agentd/main.ts configures it) and the same real container (the
 * test image): `kernel.handle` of process.run `true` — tool.call and policy.decision, the
 * preview, the gate, the execution through the sandbox agent, tool.result — each side
 * through its own run's RunWriter, as a drive appends. **with**: as shipped: a call that
 * needs no person (this one) has its `tool.started` in the commit of its tool.call and
 * policy.decision, awaited until Redis acknowledged it, then the gate (one head read).
 * **without**: the path before the record: the same commit without it (see withoutStarts).
 * `true` is the cheapest command, so the ratio is the worst case. Also shown: a bare
 * `tool.started` append's p50 (what an approved call's record costs: the writer's `begin`,
 * the gate and the record in one compare-and-append, instead of the gate's head read).
 *
 * After a warm-up, calls alternate between the sides in pairs whose order alternates, so
 * the machine's drift and load hit both alike; the ratio is of the two p50s.
 * Prints a table and one JSON line. Exit status: 1 when a call does not succeed or the
 * log does not hold one tool.started per call of the "with" side; 2 on bad arguments; a
 * missed target is printed MISSED, not fatal. Must never: be run by the tests.
 */
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { create } from "@bufbuild/protobuf";
import { Redis } from "ioredis";
import type { LoggedEvent } from "../internal/eventlog/event-codec.ts";
import type { EventLog } from "../internal/eventlog/port.ts";
import { RedisEventLog } from "../internal/eventlog/redis-event-log.ts";
import { RunStartedSchema, ToolStartedSchema } from "../internal/gen/agentd/v1/events_pb.js";
import { createKernel, type KernelRun } from "../internal/kernel/kernel.ts";
import { createRunSecrets } from "../internal/kernel/run-secrets.ts";
import { createRunWriter, type RunWriter } from "../internal/kernel/run-writer.ts";
import { sandboxImage, TEST_LIMITS, testSandbox } from "../internal/testing/docker.ts";
import { startRedis } from "../internal/testing/redis-server.ts";
import { queueRun, testImagePolicy } from "../internal/testing/worker-fixtures.ts";

const { values } = parseArgs({
  options: {
    calls: { type: "string", default: "50" },
    rounds: { type: "string", default: "10" },
    fsync: { type: "string", default: "everysec" },
  },
});
const calls = Number(values.calls);
const rounds = Number(values.rounds);
const fsync = values.fsync;
if (!Number.isInteger(calls) || calls < 1 || !Number.isInteger(rounds) || rounds < 2) {
  console.error(`--calls and --rounds: want integers >= 1 and >= 2, got ${calls}, ${rounds}`);
  process.exit(2);
}
if (fsync !== "always" && fsync !== "everysec") {
  console.error(`--fsync: want always or everysec, got ${fsync}`);
  process.exit(2);
}

const TARGET = 1.05;
const policy = testImagePolicy();

/**
 * The path as it was before the record: the same log, except that a tool.started append is
 * answered at once and not stored (a call that needs no person has it in its first commit:
 * that commit keeps its other events), and a writer whose `begin` is the gate alone (one
 * head read). A measuring device of this file: the kernel has no switch to skip the record.
 */
function withoutStarts(log: EventLog): EventLog {
  return new Proxy(log, {
    get(target, key) {
      if (key === "append")
        return (req: Parameters<EventLog["append"]>[0]) =>
          req.payload.case === "toolStarted"
            ? Promise.resolve({ seq: 0, event: { seq: 0n } } as unknown as LoggedEvent)
            : target.append(req);
      const v = Reflect.get(target, key);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}

function gateOnly(w: RunWriter): RunWriter {
  return {
    ...w,
    begin: async () => {
      await w.gate();
      return undefined as unknown as LoggedEvent;
    },
  };
}

const p50 = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
};

const redis = await startRedis({ appendfsync: fsync });
const client = new Redis(redis.url, { enableAutoPipelining: true });
const t = await testSandbox();
let failures = 0;
try {
  const log = new RedisEventLog({ client });
  const box = await t.sandbox.create({
    runId: "bench-tool-started",
    tenantId: "acme",
    image: sandboxImage("test"),
    limits: TEST_LIMITS,
    network: "none",
  });
  /**
   * A side: its own run (so neither writer reads the other's events), appended through a
   * RunWriter as a drive does, same container; `record` false: the gate alone, as before.
   */
  const side = async (record: boolean) => {
    const run = await queueRun(log, { prompt: "bench tool.started" });
    const fence = await log.bumpEpoch(run.runId);
    const started = await log.append({
      ...run,
      fence,
      payload: {
        case: "runStarted",
        value: create(RunStartedSchema, { workerId: "bench", epoch: BigInt(fence) }),
      },
    });
    const l = record ? log : withoutStarts(log);
    const writer = createRunWriter({
      log: l,
      ...run,
      fence,
      secrets: createRunSecrets(),
      head: started.seq,
    });
    const kRun: KernelRun = {
      ...run,
      fence,
      sandbox: box,
      workerId: "bench",
      writer: record ? writer : gateOnly(writer),
    };
    return {
      kernel: createKernel({ log: l, policy: () => policy, secretProviders: [] }),
      run: kRun,
    };
  };
  const sides = { with: await side(true), without: await side(false) };
  const ms = { with: [] as number[], without: [] as number[] };
  let n = 0;
  let withCalls = 0;
  const once = async (side: "with" | "without", keep: boolean): Promise<void> => {
    const callId = `b${++n}`;
    const t0 = performance.now();
    const out = await sides[side].kernel.handle(sides[side].run, {
      callId,
      tool: "process.run",
      input: { command: "true" },
    });
    const took = performance.now() - t0;
    if (out.kind !== "result" || !out.ok) {
      failures++;
      console.error(`${side} ${callId}: ${JSON.stringify(out)}`);
    }
    if (keep) ms[side].push(took);
    if (side === "with") withCalls++;
  };
  for (let i = 0; i < 10; i++) await once(i % 2 === 0 ? "with" : "without", false); // warm-up
  // Call by call, in pairs whose order alternates: load on the machine hits both sides alike.
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < calls; i++) {
      const first = (r + i) % 2 === 0 ? "with" : "without";
      await once(first, true);
      await once(first === "with" ? "without" : "with", true);
    }
  }
  // A bare append of the record, for scale.
  const bare: number[] = [];
  for (let i = 0; i < calls * 2; i++) {
    const t0 = performance.now();
    await log.append({
      runId: sides.with.run.runId,
      sessionId: sides.with.run.sessionId,
      fence: sides.with.run.fence,
      payload: { case: "toolStarted", value: create(ToolStartedSchema, { callId: `x${i}` }) },
    });
    bare.push(performance.now() - t0);
  }
  const starts = (await log.read(sides.with.run.runId, 0)).filter(
    (e) => e.type === "tool.started",
  ).length;
  if (starts !== withCalls + calls * 2) {
    failures++;
    console.error(`the log holds ${starts} tool.started, want ${withCalls + calls * 2}`);
  }
  const w = p50(ms.with);
  const wo = p50(ms.without);
  const ratio = w / wo;
  const ok = ratio <= TARGET;
  console.log(
    `process.run "true" through the kernel, ${rounds * calls} calls per side (pairs, alternating), Redis appendfsync ${fsync}`,
  );
  console.log(`  with tool.started     p50 ${w.toFixed(2)} ms`);
  console.log(`  without (not stored)  p50 ${wo.toFixed(2)} ms`);
  console.log(`  bare tool.started append p50 ${p50(bare).toFixed(2)} ms`);
  console.log(`  ratio ${ratio.toFixed(3)} — target <= ${TARGET}: ${ok ? "OK" : "MISSED"}`);
  console.log(
    JSON.stringify({
      bench: "tool-started",
      fsync,
      rounds,
      calls,
      withP50Ms: w,
      withoutP50Ms: wo,
      appendP50Ms: p50(bare),
      ratio,
      targets: { ratio: { target: TARGET, ok } },
      failures,
    }),
  );
  await box.destroy();
} finally {
  await t.cleanup();
  client.disconnect();
  await redis.stop();
}
if (failures > 0) process.exit(1);
