#!/usr/bin/env node
/**
 * What secret containment costs an ordinary call: `node bench/secret-containment.ts
 * [--calls N] [--rounds N]` (what `make bench` runs; never run by the tests). Issue #27's
 * target: the check adds <= 5% to process.run p50 for calls that carry no secret.
 *
 * Both sides are the same kernel path on the same private redis-server and the same real
 * container (the test image): `kernel.handle` of process.run `true`, each side its own run
 * with an empty taint (as a drive starts). **with**: the kernel as shipped (the
 * containment hooks decide the call carries no secret and pay nothing more). **without**:
 * the same kernel.ts with the three hooks (secret-containment.ts) replaced by no-ops — a
 * copy written next to it for the run of this script and removed at its end (the kernel
 * has no switch to skip them). Also shown, for scale: the p50 of a call that does carry a
 * secret (`test -n "$ENV.BENCH_TOKEN"`: two scans of /workspace, /tmp and /cache).
 *
 * Calls alternate between the sides in pairs whose order alternates. Prints a table and
 * one JSON line. Exit status: 1 when a call does not succeed; 2 on bad arguments; a missed
 * target is printed MISSED, not fatal. Must never: be run by the tests.
 */
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { create } from "@bufbuild/protobuf";
import { Redis } from "ioredis";
import { RedisEventLog } from "../internal/eventlog/redis-event-log.ts";
import { RunStartedSchema } from "../internal/gen/agentd/v1/events_pb.js";
import type { createKernel as CreateKernel, KernelRun } from "../internal/kernel/kernel.ts";
import { createKernel } from "../internal/kernel/kernel.ts";
import { createRunSecrets } from "../internal/kernel/run-secrets.ts";
import { createRunWriter } from "../internal/kernel/run-writer.ts";
import { CONTAINER_STATE } from "../internal/kernel/secret-taint.ts";
import { createEnvSecretProvider } from "../internal/kernel/secrets.ts";
import { sandboxImage, TEST_LIMITS, testSandbox } from "../internal/testing/docker.ts";
import { startRedis } from "../internal/testing/redis-server.ts";
import { queueRun, testImagePolicy } from "../internal/testing/worker-fixtures.ts";

const { values } = parseArgs({
  options: {
    calls: { type: "string", default: "50" },
    rounds: { type: "string", default: "6" },
  },
});
const calls = Number(values.calls);
const rounds = Number(values.rounds);
if (!Number.isInteger(calls) || calls < 1 || !Number.isInteger(rounds) || rounds < 2) {
  console.error(`--calls and --rounds: want integers >= 1 and >= 2, got ${calls}, ${rounds}`);
  process.exit(2);
}
const TARGET = 1.05;
const base = testImagePolicy();
const policy = {
  ...base,
  secrets: { allow: ["BENCH_TOKEN"], providers: [{ type: "env" as const }] },
  capabilities: {
    ...base.capabilities,
    "process.run": { ...base.capabilities["process.run"], approval: "never" as const },
  },
};

/** The kernel without the containment hooks: a copy of kernel.ts with them as no-ops. */
const HOOKS =
  /^import \{ containCall, guardTaint, heldPatchPreview, previewTaint \} from "\.\/secret-containment\.ts";$/m;
const kernelUrl = new URL("../internal/kernel/kernel.ts", import.meta.url);
const source = readFileSync(kernelUrl, "utf8");
if (!HOOKS.test(source)) {
  console.error("kernel.ts no longer imports the containment hooks as this bench expects");
  process.exit(1);
}
const copyUrl = new URL(
  `../internal/kernel/.kernel-no-containment-${process.pid}.ts`,
  import.meta.url,
);
writeFileSync(
  copyUrl,
  source.replace(
    HOOKS,
    "const guardTaint = async (_r: unknown, _c: unknown, d: any) => d;\n" +
      "const previewTaint = (_r: unknown, _c: unknown, _d: unknown, pv: any) => pv;\n" +
      "const containCall = async (..._a: unknown[]): Promise<undefined> => undefined;\n" +
      "const heldPatchPreview = (..._a: unknown[]): undefined => undefined;",
  ),
);
let createRaw: typeof CreateKernel;
try {
  createRaw = ((await import(copyUrl.href)) as { createKernel: typeof CreateKernel }).createKernel;
} finally {
  rmSync(copyUrl, { force: true });
}

const p50 = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
};

const redis = await startRedis({});
const client = new Redis(redis.url, { enableAutoPipelining: true });
const t = await testSandbox();
let failures = 0;
try {
  const log = new RedisEventLog({ client });
  const box = await t.sandbox.create({
    runId: "bench-secret-containment",
    tenantId: "acme",
    image: sandboxImage("test"),
    limits: TEST_LIMITS,
    network: "none",
  });
  const opts = {
    log,
    policy: () => policy,
    secretProviders: [createEnvSecretProvider({ BENCH_TOKEN: "bench-token-value-1234" })],
  };
  const side = async (make: typeof CreateKernel) => {
    const run = await queueRun(log, { prompt: "bench secret containment" });
    const fence = await log.bumpEpoch(run.runId);
    const started = await log.append({
      ...run,
      fence,
      payload: {
        case: "runStarted",
        value: create(RunStartedSchema, { workerId: "bench", epoch: BigInt(fence) }),
      },
    });
    const writer = createRunWriter({
      log,
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
      writer,
      taint: new Map(),
    };
    return { kernel: make(opts), run: kRun };
  };
  const sides = { with: await side(createKernel), without: await side(createRaw) };
  const ms = { with: [] as number[], without: [] as number[] };
  let n = 0;
  const once = async (s: "with" | "without", command: string): Promise<number> => {
    const callId = `b${++n}`;
    const t0 = performance.now();
    const out = await sides[s].kernel.handle(sides[s].run, {
      callId,
      tool: "process.run",
      input: { command },
    });
    const took = performance.now() - t0;
    if (out.kind !== "result" || !out.ok) {
      failures++;
      console.error(`${s} ${callId}: ${JSON.stringify(out)}`);
    }
    return took;
  };
  for (let i = 0; i < 10; i++) await once(i % 2 === 0 ? "with" : "without", "true"); // warm-up
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < calls; i++) {
      const first = (r + i) % 2 === 0 ? "with" : "without";
      const second = first === "with" ? "without" : "with";
      ms[first].push(await once(first, "true"));
      ms[second].push(await once(second, "true"));
    }
  }
  // A call that carries a secret waits for a person: timed from the approval (its run).
  const carrying: number[] = [];
  for (let i = 0; i < Math.min(calls, 20); i++) {
    const call = {
      callId: `s${++n}`,
      tool: "process.run",
      input: { command: 'test -n "$ENV.BENCH_TOKEN"' },
    };
    const first = await sides.with.kernel.handle(sides.with.run, call);
    const t0 = performance.now();
    const out =
      first.kind === "paused"
        ? await sides.with.kernel.continueAfterApproval(sides.with.run, call, {
            approved: true,
            reason: "",
          })
        : first;
    carrying.push(performance.now() - t0);
    if (out.kind !== "result" || !out.ok) {
      failures++;
      console.error(`carrying ${call.callId}: ${JSON.stringify(out)}`);
    }
  }
  // A secret call that wrote no file holds only the container itself (kernel state such as
  // the PID counter could carry the value), never a path.
  const held = [...(sides.with.run.taint?.keys() ?? [])].filter((k) => k !== CONTAINER_STATE);
  if (held.length !== 0) {
    failures++;
    console.error(`a secret call that wrote nothing held paths: ${held.join(", ")}`);
  }
  const w = p50(ms.with);
  const wo = p50(ms.without);
  const ratio = w / wo;
  const ok = ratio <= TARGET;
  console.log(
    `process.run "true" through the kernel, ${rounds * calls} calls per side (pairs, alternating)`,
  );
  console.log(`  with containment      p50 ${w.toFixed(2)} ms`);
  console.log(`  without (no-op hooks) p50 ${wo.toFixed(2)} ms`);
  console.log(
    `  an approved call carrying a secret (two scans) p50 ${p50(carrying).toFixed(2)} ms`,
  );
  console.log(`  ratio ${ratio.toFixed(3)} — target <= ${TARGET}: ${ok ? "OK" : "MISSED"}`);
  console.log(
    JSON.stringify({
      bench: "secret-containment",
      calls: rounds * calls,
      p50WithMs: w,
      p50WithoutMs: wo,
      p50CarryingMs: p50(carrying),
      ratio,
      target: TARGET,
      ok,
    }),
  );
} finally {
  client.disconnect();
  await t.cleanup();
  await redis.stop();
}
process.exit(failures > 0 ? 1 : 0);
