/**
 * Run archives (internal/archive): the cost of archiving an ended run before its deletion,
 * of verifying an archive (what `agentctl verify --archive` and the server's first read of
 * an archived run do), and of re-archiving an archived run (a verify, nothing written).
 * The run lives on the embedded log and the fs artifact store in a temp directory:
 * `--events N` output deltas (default 10,000) and one blob of `--blob-mib M` (default 64).
 *
 *   node bench/archive.ts [--events N] [--blob-mib M]
 *
 * Prints a table, then one line of JSON. Exit 1 when the archive does not hold the run's
 * events byte for byte or does not verify; 2 on bad arguments.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { create } from "@bufbuild/protobuf";
import { ulid } from "ulid";
import { openArchive } from "../internal/archive/open-archive.ts";
import { archiveRun } from "../internal/archive/write-archive.ts";
import { FsArtifactStore } from "../internal/artifacts/fs-artifact-store.ts";
import { openFileEventLog } from "../internal/eventlog/file-event-log.ts";
import {
  ArtifactEmittedSchema,
  OutputDeltaSchema,
  RunCompletedSchema,
  RunQueuedSchema,
} from "../internal/gen/agentd/v1/events_pb.js";

const { values } = parseArgs({
  options: {
    events: { type: "string", default: "10000" },
    "blob-mib": { type: "string", default: "64" },
  },
});
const events = Number(values.events);
const blobMib = Number(values["blob-mib"]);
if (!Number.isInteger(events) || events < 1 || !Number.isFinite(blobMib) || blobMib < 0) {
  process.stderr.write("usage: node bench/archive.ts [--events N>=1] [--blob-mib M>=0]\n");
  process.exit(2);
}

const root = mkdtempSync(join(process.env.AGENTD_BENCH_DIR ?? tmpdir(), "agentd-bench-archive-"));
const log = await openFileEventLog({ dir: join(root, "log"), fsync: false });
const artifacts = new FsArtifactStore(join(root, "artifacts"));
try {
  const runId = ulid();
  const blob = await artifacts.put(randomBytes(blobMib * 1024 * 1024));
  const text = "x".repeat(100);
  await log.append({
    runId,
    sessionId: "s",
    tenantId: "bench",
    payload: {
      case: "runQueued",
      value: create(RunQueuedSchema, { tenantId: "bench", prompt: "p" }),
    },
  });
  for (let i = 0; i < events; i++)
    await log.append({
      runId,
      sessionId: "s",
      payload: { case: "outputDelta", value: create(OutputDeltaSchema, { text }) },
    });
  await log.append({
    runId,
    sessionId: "s",
    payload: {
      case: "artifactEmitted",
      value: create(ArtifactEmittedSchema, { name: "blob", digest: blob.digest }),
    },
  });
  await log.append({
    runId,
    sessionId: "s",
    payload: { case: "runCompleted", value: create(RunCompletedSchema, {}) },
  });

  const deps = { log, artifacts, dir: join(root, "archive") };
  const t0 = performance.now();
  const first = await archiveRun(deps, "bench", runId);
  const archiveMs = performance.now() - t0;
  const t1 = performance.now();
  const opened = await openArchive(first.path);
  const verifyMs = performance.now() - t1;
  const t2 = performance.now();
  const again = await archiveRun(deps, "bench", runId);
  const rearchiveMs = performance.now() - t2;

  const stored = (await log.read(runId, 0)).map((e) => `${e.json}\n`).join("");
  const ok =
    first.written &&
    !again.written &&
    readFileSync(join(first.path, "events.jsonl"), "utf8") === stored &&
    opened.events.length === events + 3;
  const mib = (Buffer.byteLength(stored) + blob.size) / 1024 / 1024;
  const rows: [string, string][] = [
    [
      "run",
      `${events + 3} events, ${(Buffer.byteLength(stored) / 1024 / 1024).toFixed(1)} MiB of events + ${blobMib} MiB blob`,
    ],
    [
      "archive (write, fsync, rename)",
      `${archiveMs.toFixed(0)} ms (${(mib / (archiveMs / 1000)).toFixed(0)} MiB/s)`,
    ],
    [
      "verify (open whole)",
      `${verifyMs.toFixed(0)} ms (${(mib / (verifyMs / 1000)).toFixed(0)} MiB/s)`,
    ],
    ["re-archive (verify, no write)", `${rearchiveMs.toFixed(0)} ms`],
    ["correct", ok ? "yes" : "NO"],
  ];
  for (const [k, v] of rows) process.stdout.write(`${k.padEnd(32)}${v}\n`);
  process.stdout.write(
    `${JSON.stringify({ bench: "archive", events: events + 3, blobMib, archiveMs, verifyMs, rearchiveMs, ok })}\n`,
  );
  process.exitCode = ok ? 0 : 1;
} finally {
  await log.close();
  rmSync(root, { recursive: true, force: true });
}
