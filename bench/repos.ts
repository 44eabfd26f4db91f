#!/usr/bin/env node
/**
 * The corpus through agentd against the same commands by hand (issue #24):
 * `node bench/repos.ts [--rounds 1] [--only python,go]` (never run by the tests).
 *
 * Per ecosystem (examples/: python-billing, go-shortid, rust-thousands, java-slugs,
 * node-durations), in one process, in a fresh dependency cache store:
 *   1. a cold run through agentd (the run driver as a worker runs it: the embedded event
 *      log, the kernel on the default policy.yaml plus `sandbox.network: allowlist` and the
 *      ecosystem's registry preset, the language image chosen by detection, the egress
 *      proxy, the real registry, the replay model playing the example's transcript with no
 *      delays): its setup time (run.started to the setup's tool.result) is the cold setup;
 *   2. per round, interleaved: a warm run (the cache the cold run saved restored) and the
 *      same setup and test commands by hand: `docker run` of a fresh container of the same
 *      image with the same limits, tmpfs mounts and cache variables, the same cache archive
 *      unpacked into it, the workspace unpacked, then the setup line and the test line the
 *      run recorded. (a) = warm run's time from CreateRun (run.queued) to the first test
 *      result / the by-hand container's time from `docker run` to the test's end. Target
 *      <= 1.2. (b) = warm setup / cold setup. Target <= 0.2.
 *   3. (c) the image's size (docker image inspect) and the cold setup time. The images are
 *      local (`make images`): there is no pull to time.
 * Medians over the rounds. The last line is JSON. Exit status 1 when a run does not complete
 * or the hand-run fails, 2 on bad arguments; a missed target is printed as MISSED.
 *
 * On this machine the registries resolve to a reserved range behind a TLS-intercepting
 * mirror: the policy lists their addresses under network.private (internal/testing/
 * corpus.ts); the by-hand container is on Docker's default bridge (its warm setup needs no
 * network, and makes no request through agentd either: internal/worker/corpus-e2e.test.ts).
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import Docker from "dockerode";
import { FsArtifactStore } from "../internal/artifacts/fs-artifact-store.ts";
import { createFsCacheStore } from "../internal/depcache/fs-cache-store.ts";
import type { DepCacheStore } from "../internal/depcache/port.ts";
import { createReplayEngine, loadTranscript } from "../internal/engine/replay-engine.ts";
import { openFileEventLog } from "../internal/eventlog/file-event-log.ts";
import type { Event } from "../internal/gen/agentd/v1/events_pb.js";
import type { Policy } from "../internal/kernel/policy-schema.ts";
import { CACHE_DIR, CACHE_ENV, cacheMountSpec } from "../internal/sandbox/cache-env.ts";
import { packWorkspace } from "../internal/sandbox/workspace-archive.ts";
import { CORPUS, corpusPolicy, EXAMPLES, exampleFiles } from "../internal/testing/corpus.ts";
import { testSandbox } from "../internal/testing/docker.ts";
import { stubDriverDeps } from "../internal/testing/driver-deps.ts";
import { queueRun } from "../internal/testing/worker-fixtures.ts";
import { driveRun } from "../internal/worker/run-driver.ts";

const TARGET_HAND = 1.2;
const TARGET_WARM = 0.2;
const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "1" },
    only: { type: "string", default: "" },
    timeline: { type: "boolean", default: false },
  },
});
const rounds = Number(values.rounds);
if (!Number.isInteger(rounds) || rounds < 1 || rounds > 10) {
  process.stderr.write("--rounds: an integer 1..10\n");
  process.exit(2);
}
const only = values.only === "" ? [] : values.only.split(",");
const corpus = CORPUS.filter((c) => only.length === 0 || only.includes(c.ecosystem));
if (corpus.length === 0) {
  process.stderr.write(`--only: some of ${CORPUS.map((c) => c.ecosystem).join(",")}\n`);
  process.exit(2);
}

const dir = mkdtempSync(join(tmpdir(), "agentd-bench-repos-"));
const log = await openFileEventLog({ dir: join(dir, "log") });
const artifacts = new FsArtifactStore(join(dir, "artifacts"));
const t = await testSandbox();
const docker = new Docker();

const ms = (e: Event | undefined) =>
  e?.ts === undefined ? Number.NaN : Number(e.ts.seconds) * 1000 + e.ts.nanos / 1e6;

function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(1);
}

interface RunFigures {
  setupMs: number;
  toFirstTestMs: number;
  restored?: { digest: string };
  setupLine: string;
  testLine: string;
}

/** One run of `name` through the run driver, to its end; its figures. */
async function agentdRun(name: string, policy: Policy, store: DepCacheStore): Promise<RunFigures> {
  const ws = await artifacts.put(await packWorkspace(exampleFiles(name)));
  const run = await queueRun(log, {
    prompt: `fix the failing test of ${name}`,
    workspaceDigest: ws.digest,
    workspaceSizeBytes: ws.size,
  });
  const engine = createReplayEngine({
    transcript: loadTranscript(join(EXAMPLES, name, "transcript.json")),
    firstDelayMs: 0,
    deltaDelayMs: 0,
  });
  const deps = stubDriverDeps(
    { log, policy, sandbox: t.sandbox, artifacts, baseURL: "http://127.0.0.1:9" },
    { engine, depCache: store },
  );
  const outcome = await driveRun(
    deps,
    run.runId,
    await log.bumpEpoch(run.runId),
    new AbortController().signal,
  );
  const events = (await log.read(run.runId, 0)).map((e) => e.event);
  const find = (c: string) => events.find((e) => e.payload.case === c);
  const calls = new Map<string, string>();
  for (const e of events)
    if (e.payload.case === "toolCall") calls.set(e.payload.value.callId, e.payload.value.tool);
  const resultOf = (tool: string) =>
    events.find(
      (e) => e.payload.case === "toolResult" && calls.get(e.payload.value.callId) === tool,
    );
  const setup = resultOf("setup.run");
  const test = resultOf("test.run");
  const doc = (e: Event | undefined) => {
    const json = e?.payload.case === "toolResult" ? e.payload.value.outputJson : "";
    const raw = json === "" ? {} : JSON.parse(json);
    return (raw.result ?? raw) as { command?: string; exitCode?: number };
  };
  if (outcome !== "completed" || doc(setup).exitCode !== 0 || test === undefined)
    fail(`${name} run ${run.runId}: ${outcome}; setup ${JSON.stringify(doc(setup)).slice(-1500)}`);
  const restored = find("cacheRestored");
  if (values.timeline) {
    const t0 = ms(find("runQueued"));
    const lines = events.map((e) => {
      const v = e.payload.value as { tool?: string; callId?: string } | undefined;
      return `  +${(ms(e) - t0).toFixed(0).padStart(6)} ms ${e.payload.case} ${v?.tool ?? v?.callId ?? ""}`;
    });
    process.stdout.write(`${name} ${run.runId}:\n${lines.join("\n")}\n`);
  }
  return {
    setupMs: ms(setup) - ms(find("runStarted")),
    toFirstTestMs: ms(test) - ms(find("runQueued")),
    ...(restored?.payload.case === "cacheRestored"
      ? { restored: { digest: restored.payload.value.digest } }
      : {}),
    setupLine: doc(setup).command ?? "",
    testLine: doc(test).command ?? "",
  };
}

/**
 * The same setup and test lines by hand: `docker run` of a fresh container of `image` with
 * the sandbox's limits and mounts, the cache archive and the workspace unpacked first.
 * Returns the wall time from spawning `docker run` to its exit, and the test's exit code.
 */
async function byHand(
  name: string,
  image: string,
  policy: Policy,
  cacheArchive: Uint8Array,
  lines: { setup: string; test: string },
): Promise<{ ms: number; testExit: number }> {
  const ws = Buffer.from(await packWorkspace(exampleFiles(name))).toString("base64");
  const tmp = policy.sandbox.tmp;
  const script = [
    `tar -x -f - -C / || exit 90`,
    `echo '${ws}' | base64 -d | tar -x -f - -C /workspace || exit 91`,
    `cd /workspace`,
    `( ${lines.setup} ) >/dev/null 2>&1 || exit 92`,
    `( ${lines.test} ) >/dev/null 2>&1; echo "test-exit:$?"`,
  ].join("\n");
  const env = Object.entries(CACHE_ENV).flatMap(([k, v]) => ["-e", `${k}=${v}`]);
  const args = [
    "run",
    "--rm",
    "-i",
    "--read-only",
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges",
    "--cpus",
    String(policy.sandbox.cpu),
    "--memory",
    String(policy.sandbox.memory + policy.sandbox.workspaceSize),
    "--pids-limit",
    String(policy.sandbox.pids),
    "--tmpfs",
    `/tmp:rw,exec,nosuid,nodev,size=${tmp},mode=1777`,
    "--tmpfs",
    `/workspace:rw,exec,nosuid,nodev,size=${policy.sandbox.workspaceSize},uid=1000,gid=1000,mode=0755`,
    "--tmpfs",
    `${CACHE_DIR}:${cacheMountSpec(policy.sandbox.cacheSize)}`,
    ...env,
    "--user",
    "1000:1000",
    "-w",
    "/workspace",
    image,
    "sh",
    "-c",
    script,
  ];
  const t0 = performance.now();
  const { code, stdout, stderr } = await new Promise<{
    code: number;
    stdout: string;
    stderr: string;
  }>((resolve, reject) => {
    const child = spawn("docker", args, { stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    child.on("error", reject);
    child.on("close", (c) => resolve({ code: c ?? -1, stdout, stderr }));
    child.stdin.end(Buffer.from(cacheArchive));
  });
  const took = performance.now() - t0;
  const m = /test-exit:(\d+)/.exec(stdout);
  if (code !== 0 || m === null)
    fail(
      `${name} by hand: docker run exited ${code}: ${stdout.slice(-500)} ${stderr.slice(-1500)}`,
    );
  return { ms: took, testExit: Number(m[1]) };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)] as number;
};

interface Row {
  ecosystem: string;
  example: string;
  image: string;
  imageBytes: number;
  coldSetupMs: number;
  warmSetupMs: number;
  warmToTestMs: number;
  handMs: number;
  handRatio: number;
  warmRatio: number;
  rounds: { warmSetupMs: number; warmToTestMs: number; handMs: number }[];
}
const rows: Row[] = [];
try {
  for (const ex of corpus) {
    const image = `agentd-sandbox-${ex.ecosystem}:latest`;
    const imageBytes = (await docker.getImage(image).inspect()).Size;
    const policy = await corpusPolicy(ex.preset);
    const store = createFsCacheStore({
      dir: join(dir, `cache-${ex.ecosystem}`),
      maxBytes: 4 * 1024 ** 3,
    });
    const cold = await agentdRun(ex.name, policy, store);
    if (cold.restored !== undefined) fail(`${ex.name}: the cold run restored a cache`);
    const per: Row["rounds"] = [];
    for (let r = 0; r < rounds; r++) {
      const warm = await agentdRun(ex.name, policy, store);
      if (warm.restored === undefined) fail(`${ex.name}: the warm run restored no cache`);
      const archive = await store.read("acme", warm.restored.digest);
      if (archive === undefined) fail(`${ex.name}: the cache archive is gone`);
      const hand = await byHand(ex.name, image, policy, archive, {
        setup: warm.setupLine,
        test: warm.testLine,
      });
      if (hand.testExit === 0) fail(`${ex.name} by hand: the unpatched tests passed`);
      per.push({ warmSetupMs: warm.setupMs, warmToTestMs: warm.toFirstTestMs, handMs: hand.ms });
      process.stdout.write(
        `${ex.ecosystem} round ${r + 1}: warm run: setup ${warm.setupMs.toFixed(0)} ms, CreateRun to first test result ${warm.toFirstTestMs.toFixed(0)} ms; by hand (${warm.setupLine} && ${warm.testLine}): ${hand.ms.toFixed(0)} ms (test exit ${hand.testExit})\n`,
      );
    }
    const warmSetupMs = median(per.map((p) => p.warmSetupMs));
    const warmToTestMs = median(per.map((p) => p.warmToTestMs));
    const handMs = median(per.map((p) => p.handMs));
    rows.push({
      ecosystem: ex.ecosystem,
      example: ex.name,
      image,
      imageBytes,
      coldSetupMs: cold.setupMs,
      warmSetupMs,
      warmToTestMs,
      handMs,
      handRatio: warmToTestMs / handMs,
      warmRatio: warmSetupMs / cold.setupMs,
      rounds: per,
    });
  }
} finally {
  await t.cleanup();
  await log.close();
  rmSync(dir, { recursive: true, force: true });
}

const verdict = (v: number, max: number) => (v <= max ? "ok" : "MISSED");
process.stdout.write(
  `\n| ecosystem | image size | cold setup | warm setup | (b) warm/cold | CreateRun to 1st test (warm) | by hand | (a) agentd/hand |\n|---|---|---|---|---|---|---|---|\n`,
);
for (const r of rows)
  process.stdout.write(
    `| ${r.ecosystem} | ${(r.imageBytes / 1e6).toFixed(0)} MB | ${(r.coldSetupMs / 1000).toFixed(2)} s | ${(r.warmSetupMs / 1000).toFixed(2)} s | ${r.warmRatio.toFixed(3)} ${verdict(r.warmRatio, TARGET_WARM)} | ${(r.warmToTestMs / 1000).toFixed(2)} s | ${(r.handMs / 1000).toFixed(2)} s | ${r.handRatio.toFixed(2)} ${verdict(r.handRatio, TARGET_HAND)} |\n`,
  );
process.stdout.write(
  `${JSON.stringify({
    bench: "repos",
    rounds,
    rows,
    targets: Object.fromEntries(
      rows.flatMap((r) => [
        [
          `${r.ecosystem}.hand`,
          { value: r.handRatio, max: TARGET_HAND, met: r.handRatio <= TARGET_HAND },
        ],
        [
          `${r.ecosystem}.warm`,
          { value: r.warmRatio, max: TARGET_WARM, met: r.warmRatio <= TARGET_WARM },
        ],
      ]),
    ),
  })}\n`,
);
