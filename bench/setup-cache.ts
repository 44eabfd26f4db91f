#!/usr/bin/env node
/**
 * The setup step's cache (issue #24): `node bench/setup-cache.ts [--rounds 2]` (never run
 * by the tests). Real parts: the base image, a Docker sandbox on its egress network, the
 * run's egress proxy, the real npm registry (policy network.presets: [npm]; the registry's
 * address range under network.private for machines whose registries resolve to a reserved
 * range), the directory cache store. The repository is bench/fixtures/setup-npm: express
 * 4.21.2 and its 70-odd dependencies, package-lock.json. The model answers "done" at once.
 *
 * Per round, in a fresh store: a cold run (nothing cached: npm ci downloads everything,
 * then /cache is saved) and a warm run of the same repository (the cache restored, npm ci
 * from it). Setup time = from `run.started` to the setup's `tool.result` (the restore is
 * in it); the save after a cold setup is shown apart. Target: warm / cold <= 0.2. Medians
 * over the rounds. The last line is JSON. Exit status 1 when a run does not complete or a
 * setup fails, 2 on bad arguments; a missed target is printed as MISSED, not an error.
 *
 * Machine needs: Docker, the base image (make images), a registry reachable with the
 * machine's CA roots in /etc/ssl/certs/ca-certificates.crt (handed to each sandbox).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { create } from "@bufbuild/protobuf";
import { ulid } from "ulid";
import { FsArtifactStore } from "../internal/artifacts/fs-artifact-store.ts";
import { createFsCacheStore } from "../internal/depcache/fs-cache-store.ts";
import { openFileEventLog } from "../internal/eventlog/file-event-log.ts";
import { type Event, RunQueuedSchema } from "../internal/gen/agentd/v1/events_pb.js";
import type { Sandbox } from "../internal/sandbox/port.ts";
import { packWorkspace } from "../internal/sandbox/workspace-archive.ts";
import { testSandbox } from "../internal/testing/docker.ts";
import { stubDriverDeps } from "../internal/testing/driver-deps.ts";
import { allowlistPolicy } from "../internal/testing/egress-fixtures.ts";
import { startOpenAiStub } from "../internal/testing/openai-stub.ts";
import { sayReply } from "../internal/testing/worker-fixtures.ts";
import { driveRun } from "../internal/worker/run-driver.ts";

const TARGET = 0.2;
const { values } = parseArgs({ options: { rounds: { type: "string", default: "2" } } });
const rounds = Number(values.rounds);
if (!Number.isInteger(rounds) || rounds < 1 || rounds > 20) {
  process.stderr.write("--rounds: an integer 1..20\n");
  process.exit(2);
}

const fixture = new URL("./fixtures/setup-npm/", import.meta.url);
const files = ["package.json", "package-lock.json"].map((path) => ({
  path,
  type: "file" as const,
  mode: 0o644,
  data: readFileSync(new URL(path, fixture)),
}));

const dir = mkdtempSync(join(tmpdir(), "agentd-bench-setup-"));
const log = await openFileEventLog({ dir: join(dir, "log") });
const stub = await startOpenAiStub(() => sayReply("done"));
const t = await testSandbox();
const roots = readFileSync("/etc/ssl/certs/ca-certificates.crt");
const sandbox: Sandbox = {
  ...t.sandbox,
  async create(spec) {
    const box = await t.sandbox.create({
      ...spec,
      env: { ...spec.env, NODE_EXTRA_CA_CERTS: "/tmp/host-roots.pem" },
    });
    await box.exec({
      argv: ["sh", "-c", "cat > /tmp/host-roots.pem"],
      stdin: roots,
      timeoutMs: 30_000,
      maxOutputBytes: 4096,
    });
    return box;
  },
};
const artifacts = new FsArtifactStore(join(dir, "artifacts"));
const base = allowlistPolicy({ presets: ["npm"], private: ["203.0.113.0/24"] });
const policy = {
  ...base,
  sandbox: { ...base.sandbox, cacheSize: 512 * 1024 ** 2, tmp: 64 * 1024 ** 2 },
};
const tar = await packWorkspace(files);
const upload = await artifacts.put(tar);

const ms = (e: Event | undefined) =>
  e?.ts === undefined ? Number.NaN : Number(e.ts.seconds) * 1000 + e.ts.nanos / 1e6;

async function oneRun(store: ReturnType<typeof createFsCacheStore>, tenant: string) {
  const runId = ulid();
  await log.append({
    runId,
    sessionId: ulid(),
    tenantId: tenant,
    payload: {
      case: "runQueued",
      value: create(RunQueuedSchema, {
        tenantId: tenant,
        prompt: "bench",
        priority: 5,
        workspaceDigest: upload.digest,
        workspaceSizeBytes: BigInt(upload.size),
      }),
    },
  });
  const deps = stubDriverDeps(
    { log, policy, sandbox, artifacts, baseURL: stub.baseURL },
    { depCache: store },
  );
  const outcome = await driveRun(
    deps,
    runId,
    await log.bumpEpoch(runId),
    new AbortController().signal,
  );
  const events = (await log.read(runId, 0)).map((e) => e.event);
  const find = (c: string) => events.find((e) => e.payload.case === c);
  const result = events.find(
    (e) => e.payload.case === "toolResult" && e.payload.value.callId === "setup_1",
  );
  const json = result?.payload.case === "toolResult" ? result.payload.value.outputJson : "";
  if (outcome !== "completed" || !/"exitCode":0[,}]/.test(json)) {
    process.stderr.write(`run ${runId}: ${outcome}; setup: ${json.slice(0, 2000)}\n`);
    process.exit(1);
  }
  const saved = find("cacheSaved");
  const restored = find("cacheRestored");
  const out = json === "" ? {} : JSON.parse(json);
  return {
    setupMs: ms(result) - ms(find("runStarted")),
    restoreMs: restored === undefined ? 0 : ms(restored) - ms(find("runStarted")),
    commandMs: Number((out.result ?? out).durationMs ?? 0),
    saveMs: saved === undefined ? 0 : ms(saved) - ms(result),
    restored: restored !== undefined,
    archiveBytes:
      saved?.payload.case === "cacheSaved"
        ? Number(saved.payload.value.sizeBytes)
        : restored?.payload.case === "cacheRestored"
          ? Number(restored.payload.value.sizeBytes)
          : 0,
    requests: events.filter(
      (e) => e.payload.case === "networkRequest" && e.payload.value.callId === "setup_1",
    ).length,
  };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)] as number;
};
const rows: {
  cold: number;
  warm: number;
  save: number;
  bytes: number;
  reqCold: number;
  reqWarm: number;
}[] = [];
try {
  for (let r = 0; r < rounds; r++) {
    const store = createFsCacheStore({ dir: join(dir, `cache-${r}`), maxBytes: 1024 ** 3 });
    const cold = await oneRun(store, `bench-${r}`);
    const warm = await oneRun(store, `bench-${r}`);
    if (cold.restored || !warm.restored) {
      process.stderr.write("the cold run restored a cache, or the warm run did not\n");
      process.exit(1);
    }
    rows.push({
      cold: cold.setupMs,
      warm: warm.setupMs,
      save: cold.saveMs,
      bytes: cold.archiveBytes,
      reqCold: cold.requests,
      reqWarm: warm.requests,
    });
    process.stdout.write(
      `round ${r + 1}: cold setup ${cold.setupMs.toFixed(0)} ms (npm ci ${cold.commandMs} ms, ${cold.requests} connections; then save ${cold.saveMs.toFixed(0)} ms, archive ${(cold.archiveBytes / 1024 ** 2).toFixed(1)} MiB); warm setup ${warm.setupMs.toFixed(0)} ms (restore ${warm.restoreMs.toFixed(0)} ms, npm install ${warm.commandMs} ms, ${warm.requests} connections)\n`,
    );
  }
} finally {
  await t.cleanup();
  await stub.close();
  await log.close();
  rmSync(dir, { recursive: true, force: true });
}
const cold = median(rows.map((x) => x.cold));
const warm = median(rows.map((x) => x.warm));
const ratio = warm / cold;
process.stdout.write(
  `\nsetup, median of ${rounds}: cold ${cold.toFixed(0)} ms, warm ${warm.toFixed(0)} ms, warm/cold ${ratio.toFixed(3)} (target <= ${TARGET}) ${ratio <= TARGET ? "ok" : "MISSED"}\n`,
);
process.stdout.write(
  `${JSON.stringify({ bench: "setup-cache", rounds: rows, coldMs: cold, warmMs: warm, ratio, targets: { ratio: { value: ratio, max: TARGET, met: ratio <= TARGET } } })}\n`,
);
