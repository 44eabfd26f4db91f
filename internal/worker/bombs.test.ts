/**
 * A workspace bomb never reaches the worker's memory: a run writes 2 GB into /workspace
 * (it stops at sandbox.workspaceSize with ENOSPC, in the container), then finishes; its
 * final diff streams the 1 GiB file, finds the change larger than limits.maxPatchSize and
 * fails the run with ETOOLARGE naming the limit — the worker's RSS grows by far less than
 * the file, the drive is one drive (no lost lease, no repeated model turns). Real parts:
 * the embedded log, a real container, the kernel, the AI SDK against a scripted model.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import type { Policy } from "../kernel/policy-schema.ts";
import { packWorkspace } from "../sandbox/workspace-archive.ts";
import { testSandbox } from "../testing/docker.ts";
import { stubDriverDeps } from "../testing/driver-deps.ts";
import { type OpenAiStub, type StubReply, startOpenAiStub } from "../testing/openai-stub.ts";
import { callReply, queueRun, sayReply, testImagePolicy } from "../testing/worker-fixtures.ts";
import { driveRun } from "./run-driver.ts";

/** A full collection (the test runner does not expose gc). */
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

let dir: string;
let log: FileEventLog;
let stub: OpenAiStub;
let script: StubReply[] = [];
let cleanup: () => Promise<void>;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentd-bombs-"));
  log = await openFileEventLog({ dir: join(dir, "log") });
  stub = await startOpenAiStub(() => script.shift() ?? { status: 500, body: {} });
});
after(async () => {
  await cleanup?.();
  await stub?.close();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

it("a 2 GB write stops at the workspace size; the run fails ETOOLARGE without the worker holding it", {
  timeout: 180_000,
}, async (t) => {
  const base = testImagePolicy();
  const policy: Policy = { ...base, sandbox: { ...base.sandbox, workspaceSize: 1024 ** 3 } };
  const s = await testSandbox();
  cleanup = s.cleanup;
  const artifacts = new FsArtifactStore(join(dir, "artifacts"));
  const ws = await artifacts.put(
    await packWorkspace([{ path: "a.txt", type: "file", mode: 0o644, data: Buffer.from("a\n") }]),
  );
  const deps = stubDriverDeps({
    log,
    policy,
    sandbox: s.sandbox,
    artifacts,
    baseURL: stub.baseURL,
  });
  const drive = async (runId: string) =>
    driveRun(deps, runId, await log.bumpEpoch(runId), new AbortController().signal);
  const queued = (prompt: string) =>
    queueRun(log, { prompt, workspaceDigest: ws.digest, workspaceSizeBytes: ws.size });
  // A warm-up run first: what the worker's first run loads (modules, the HTTP client) is
  // not what a bomb costs.
  const warm = await queued("warm");
  script = [callReply("w", "process.run", { command: "echo hi > b.txt" }), sayReply("ok")];
  assert.equal(await drive(warm.runId), "completed");
  const run = await queued("bomb");
  script = [
    callReply("dd", "process.run", {
      command: "head -c 2147483648 /dev/zero > big.bin; echo rc=$?; wc -c < big.bin",
      timeoutMs: 120_000,
    }),
    sayReply("wrote a big file"),
  ];
  gc();
  const held0 = process.memoryUsage().heapUsed + process.memoryUsage().external;
  const rss0 = process.memoryUsage().rss;
  let peak = rss0;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 25);
  let outcome: string;
  try {
    outcome = await drive(run.runId);
  } finally {
    clearInterval(sampler);
  }
  const growth = (peak - rss0) / 1024 ** 2;
  // What the worker keeps: the least it holds after collections over the next 2 s (the
  // container's removal and its streams finish in the background right after the drive;
  // a buffer they still hold for a moment is not kept). Measured 3-34 MiB at once, 2-11
  // MiB after the streams ended.
  const held = (m: NodeJS.MemoryUsage) => m.heapUsed + m.external;
  let retained = Number.POSITIVE_INFINITY;
  for (let i = 0; i < 8 && retained >= 8; i++) {
    if (i > 0) await new Promise((r) => setTimeout(r, 250));
    gc();
    retained = Math.min(retained, (held(process.memoryUsage()) - held0) / 1024 ** 2);
  }
  t.diagnostic(
    `after a collection the worker's heap + buffers hold ${retained.toFixed(0)} MiB more than before`,
  );
  t.diagnostic(
    `worker RSS grew ${growth.toFixed(0)} MiB while the run wrote and diffed a 1 GiB file`,
  );
  assert.equal(
    outcome,
    "failed",
    JSON.stringify((await log.read(run.runId, 0)).map((e) => e.json).slice(-3)),
  );
  const events = (await log.read(run.runId, 0)).map((e) => e.event.payload);
  const dd = events.find((p) => p.case === "toolResult" && p.value.callId === "dd");
  assert.ok(dd?.case === "toolResult");
  // The write failed in the container at the workspace's size (busybox says "I/O error",
  // coreutils "No space left on device"): the file holds 1 GiB, not 2 GB.
  const out = JSON.parse(dd.value.outputJson) as { result: { stdout: string } };
  const [rc, size] = out.result.stdout.trim().split("\n");
  assert.notEqual(rc, "rc=0", out.result.stdout);
  assert.ok(Number(size) <= 1024 ** 3 && Number(size) > 1000 ** 3, `big.bin is ${size} bytes`);
  const failed = events.at(-1);
  assert.ok(failed?.case === "runFailed");
  assert.equal(failed.value.error?.code, "ETOOLARGE");
  assert.match(failed.value.error?.message ?? "", /limits\.maxPatchSize/);
  assert.equal(
    events.filter((p) => p.case === "runStarted" || p.case === "runResumed").length,
    1,
    "one drive",
  );
  assert.equal(stub.requests.length, 4, "each model turn once (two for the warm-up)");
  // The peak is garbage (a gigabyte of socket reads) waiting for V8's next collection:
  // 44-210 MiB here depending on when it comes (183-208 MiB on a loaded 2-core machine,
  // before and after the telemetry work); a worker holding the file would show over
  // 1024 MiB. What the worker keeps after a collection is a few MiB (`retained`).
  assert.ok(growth < 256, `worker RSS grew ${growth.toFixed(0)} MiB`);
  assert.ok(retained < 32, `the worker kept ${retained.toFixed(0)} MiB`);
});
