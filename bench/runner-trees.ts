#!/usr/bin/env node
/**
 * What the runner-tree scan costs a runner call: `node bench/runner-trees.ts [--calls N]
 * [--rounds N] [--packages N]` (what `make bench` runs; never run by the tests).
 *
 * The kernel scans the runner trees (kernel/runner-trees.ts: every node_modules, venv and
 * loaded file of /workspace, and /tmp/.cache and /cache, one `find` each time) before a
 * test.run or lint.run is decided (were they written by a call other than a runner?) and
 * again after it ends (its new baseline). Both sides here are the same kernel path on the
 * same private redis-server and the same real container (agentd's base image: GNU find, as
 * a run's default image): `kernel.handle` of test.run (the policy's `tools.test: true`, no
 * person), each side its own run. **with**: the kernel as shipped. **without**: the same
 * kernel.ts with scanRunnerTrees answering an empty listing without running anything — a
 * copy written next to it for the run of this script and removed at its end (the kernel
 * has no switch to skip it). The workspace holds a node_modules of `--packages` packages
 * (10 files each) and a .venv, so the scan walks a tree of a realistic small project.
 *
 * Calls alternate between the sides in pairs whose order alternates. Prints a table and
 * one JSON line (the ratio of p50s, with over without). Exit status: 1 when a call does not
 * succeed; 2 on bad arguments. Must never: be run by the tests.
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
import { packWorkspace, type WorkspaceFile } from "../internal/sandbox/workspace-archive.ts";
import { sandboxImage, TEST_LIMITS, testSandbox } from "../internal/testing/docker.ts";
import { startRedis } from "../internal/testing/redis-server.ts";
import { queueRun, testImagePolicy } from "../internal/testing/worker-fixtures.ts";
import { indexBaseArchive } from "../internal/worker/base-index.ts";

const { values } = parseArgs({
  options: {
    calls: { type: "string", default: "30" },
    rounds: { type: "string", default: "4" },
    packages: { type: "string", default: "100" },
  },
});
const calls = Number(values.calls);
const rounds = Number(values.rounds);
const packages = Number(values.packages);
if (
  !Number.isInteger(calls) ||
  calls < 1 ||
  !Number.isInteger(rounds) ||
  rounds < 2 ||
  !Number.isInteger(packages) ||
  packages < 0
) {
  console.error(
    `--calls, --rounds and --packages: want integers >= 1, >= 2 and >= 0, got ${calls}, ${rounds}, ${packages}`,
  );
  process.exit(2);
}
const base = testImagePolicy();
const policy = {
  ...base,
  tools: { ...base.tools, test: "true" },
  capabilities: {
    ...base.capabilities,
    "test.run": { ...base.capabilities["test.run"], approval: "never" as const },
  },
};

/** The kernel without the runner-tree scan: a copy of kernel.ts whose scan runs nothing. */
const SCAN =
  /^import \{ scanRunnerTrees, type TreeScan, treeChanges \} from "\.\/runner-trees\.ts";$/m;
const kernelUrl = new URL("../internal/kernel/kernel.ts", import.meta.url);
const source = readFileSync(kernelUrl, "utf8");
if (!SCAN.test(source)) {
  console.error("kernel.ts no longer imports the runner-tree scan as this bench expects");
  process.exit(1);
}
const copyUrl = new URL(
  `../internal/kernel/.kernel-no-tree-scan-${process.pid}.ts`,
  import.meta.url,
);
writeFileSync(
  copyUrl,
  source.replace(
    SCAN,
    'import { type TreeScan, treeChanges } from "./runner-trees.ts";\n' +
      "const scanRunnerTrees = async (_box: unknown): Promise<TreeScan> => new Map();",
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

/** A small project: package.json, node_modules of `packages` packages, a .venv. */
function project(): WorkspaceFile[] {
  const files: WorkspaceFile[] = [
    { path: "package.json", type: "file", mode: 0o644, data: Buffer.from('{"name":"b"}\n') },
    { path: "src/index.js", type: "file", mode: 0o644, data: Buffer.from("module.exports=1\n") },
  ];
  for (let p = 0; p < packages; p++)
    for (let f = 0; f < 10; f++)
      files.push({
        path: `node_modules/pkg${p}/lib/f${f}.js`,
        type: "file",
        mode: 0o644,
        data: Buffer.from(`module.exports = ${p * 10 + f};\n`.repeat(20)),
      });
  for (let f = 0; f < 50; f++)
    files.push({
      path: `.venv/lib/python3/site-packages/m${f}.py`,
      type: "file",
      mode: 0o644,
      data: Buffer.from("x = 1\n"),
    });
  return files;
}

const redis = await startRedis({});
const client = new Redis(redis.url, { enableAutoPipelining: true });
const t = await testSandbox();
let failures = 0;
try {
  const log = new RedisEventLog({ client });
  const tar = await packWorkspace(project());
  const box = await t.sandbox.create({
    runId: "bench-runner-trees",
    tenantId: "acme",
    image: sandboxImage("base"),
    limits: TEST_LIMITS,
    network: "none",
    workspaceTar: tar,
  });
  const index = indexBaseArchive({
    size: tar.byteLength,
    open: async function* () {
      yield tar;
    },
  });
  const opts = { log, policy: () => policy, secretProviders: [] };
  const side = async (make: typeof CreateKernel) => {
    const run = await queueRun(log, { prompt: "bench runner trees" });
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
    // Not pristine (a call wrote before): the provenance check and its scan run on each call.
    const kRun: KernelRun = {
      ...run,
      fence,
      sandbox: box,
      workerId: "bench",
      writer,
      taint: new Map(),
      pristine: false,
      treesAsLeft: true,
      baseIndex: () => index,
    };
    return { kernel: make(opts), run: kRun };
  };
  const sides = { with: await side(createKernel), without: await side(createRaw) };
  const ms = { with: [] as number[], without: [] as number[] };
  let n = 0;
  const once = async (s: "with" | "without"): Promise<number> => {
    const callId = `t${++n}`;
    const t0 = performance.now();
    const out = await sides[s].kernel.handle(sides[s].run, { callId, tool: "test.run", input: {} });
    const took = performance.now() - t0;
    const exit =
      out.kind === "result" && out.ok ? (out.output as { exitCode?: number }).exitCode : -1;
    if (exit !== 0) {
      failures++;
      console.error(`${s} ${callId}: ${JSON.stringify(out).slice(0, 1000)}`);
    }
    return took;
  };
  for (let i = 0; i < 6; i++) await once(i % 2 === 0 ? "with" : "without"); // warm-up
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < calls; i++) {
      const first = (r + i) % 2 === 0 ? "with" : "without";
      const second = first === "with" ? "without" : "with";
      ms[first].push(await once(first));
      ms[second].push(await once(second));
    }
  }
  const w = p50(ms.with);
  const wo = p50(ms.without);
  const ratio = w / wo;
  const entries = packages * 10 + 50;
  console.log(
    `test.run through the kernel, ${rounds * calls} calls per side (pairs, alternating); runner trees of ${entries} files`,
  );
  console.log(`  with the runner-tree scan (before and after) p50 ${w.toFixed(2)} ms`);
  console.log(`  without (scan answers empty)                 p50 ${wo.toFixed(2)} ms`);
  console.log(`  ratio ${ratio.toFixed(3)} (${(w - wo).toFixed(2)} ms a call)`);
  console.log(
    JSON.stringify({
      bench: "runner-trees",
      calls: rounds * calls,
      treeFiles: entries,
      p50WithMs: w,
      p50WithoutMs: wo,
      ratio,
    }),
  );
} finally {
  client.disconnect();
  await t.cleanup();
  await redis.stop();
}
process.exit(failures > 0 ? 1 : 0);
