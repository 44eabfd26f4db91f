#!/usr/bin/env node
import { randomBytes } from "node:crypto";
/**
 * Fair upload slots against today's: `node bench/upload-throughput.ts [--mib 200] [--runs 5]`
 * (what `make bench` runs; never run by the tests). One client's upload of a workspace tar
 * of --mib MiB of incompressible files (plain, then gzip), 1 MiB chunks read from a temp
 * file, through the server's upload path into a file artifact store, alternately:
 *   - fair: the server's uploader (api/workspace-upload.ts): an unpack slot per chunk, the
 *     tenant's turn, the idle cut;
 *   - whole-stream: the same unpack with one slot taken for the life of the stream (the
 *     behaviour before slots were taken per chunk).
 * Reported: MiB/s of each (median of --runs) and fair as a ratio of whole-stream (target
 * ≥ 0.9), and the same ratio in this process's CPU time (steadier on a loaded machine).
 * The last line is JSON.
 */
import { createReadStream, createWriteStream, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { createGzip } from "node:zlib";
import * as tarStream from "tar-stream";
import { createSemaphore } from "../internal/api/semaphore.ts";
import {
  createWorkspaceUploader,
  DEFAULT_WORKSPACE_LIMITS,
} from "../internal/api/workspace-upload.ts";
import { FsArtifactStore } from "../internal/artifacts/fs-artifact-store.ts";
import { normaliseWorkspaceStream } from "../internal/sandbox/workspace-stream.ts";

const { values } = parseArgs({
  options: { mib: { type: "string", default: "200" }, runs: { type: "string", default: "5" } },
});
const MIB = Number(values.mib);
const RUNS = Number(values.runs);
const CHUNK = 1024 * 1024;
const dir = mkdtempSync(join(tmpdir(), "agentd-bench-upload-fair-"));
const plain = join(dir, "ws.tar");
const gzipped = join(dir, "ws.tar.gz");

async function writeTars(): Promise<void> {
  const pack = tarStream.pack();
  const out = createWriteStream(plain);
  pack.pipe(out);
  for (let i = 0; i < MIB / 4; i++)
    pack.entry({ name: `data/f${i}.bin`, mode: 0o644 }, randomBytes(4 * CHUNK));
  pack.finalize();
  await new Promise<void>((r) => out.on("close", () => r()));
  const gz = createWriteStream(gzipped);
  createReadStream(plain)
    .pipe(createGzip({ level: 1 }))
    .pipe(gz);
  await new Promise<void>((r) => gz.on("close", () => r()));
}

async function* chunks(path: string): AsyncGenerator<Uint8Array> {
  for await (const c of createReadStream(path, { highWaterMark: CHUNK })) yield c as Buffer;
}

const limits = { ...DEFAULT_WORKSPACE_LIMITS, maxBytes: (MIB + 64) * CHUNK };
const store = new FsArtifactStore(join(dir, "artifacts"));
const fair = createWorkspaceUploader(store, limits);
const wholeStreamSlots = createSemaphore(limits.maxConcurrentUnpacks);

/** Today's behaviour before fair slots: one slot for the whole stream. */
async function wholeStream(source: AsyncIterable<Uint8Array>): Promise<string> {
  const release = await wholeStreamSlots.acquire();
  try {
    const lim = {
      maxArchiveBytes: Math.ceil(limits.maxBytes * 1.01) + CHUNK,
      maxUnpackedBytes: limits.maxBytes,
      maxEntries: limits.maxEntries,
    };
    return (await store.putStream(normaliseWorkspaceStream(source, lim))).digest;
  } finally {
    release();
  }
}

/** Wall time and this process's CPU time (all threads: the pool's inflate and writes too). */
async function timed(
  f: () => Promise<string>,
): Promise<{ ms: number; cpuMs: number; digest: string }> {
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  const digest = await f();
  const c = process.cpuUsage(c0);
  return { ms: performance.now() - t0, cpuMs: (c.user + c.system) / 1000, digest };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

try {
  await writeTars();
  const bytes = readFileSync(plain).byteLength;
  const mibs = (ms: number) => bytes / CHUNK / (ms / 1000);
  const result: Record<string, number | string> = {
    bench: "upload-throughput",
    mib: MIB,
    runs: RUNS,
  };
  console.log(
    `bench/upload-throughput: one client, a ${(bytes / CHUNK).toFixed(0)} MiB workspace tar, median of ${RUNS}`,
  );
  for (const [kind, path] of [
    ["tar", plain],
    ["tar.gz", gzipped],
  ] as const) {
    const a: number[] = [];
    const b: number[] = [];
    const ca: number[] = [];
    const cb: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      // Alternated (and the order flipped each round) so neither side gets the warmer cache.
      const runFair = () =>
        timed(async () => (await fair.storeStream(chunks(path), { tenantId: "bench" })).digest);
      const runWhole = () => timed(() => wholeStream(chunks(path)));
      const [x, y] = i % 2 === 0 ? [await runFair(), await runWhole()] : [null, null];
      const [y2, x2] = i % 2 === 1 ? [await runWhole(), await runFair()] : [null, null];
      const f = x ?? x2;
      const w = y ?? y2;
      if (f === null || w === null || f.digest !== w.digest)
        throw new Error("the two stored different workspaces");
      a.push(f.ms);
      b.push(w.ms);
      ca.push(f.cpuMs);
      cb.push(w.cpuMs);
    }
    const ratio = mibs(median(a)) / mibs(median(b));
    // The same ratio in CPU time: what the slot handling costs, less the other load's noise.
    const cpuRatio = median(cb) / median(ca);
    console.log(
      `  ${kind.padEnd(7)} fair slots ${mibs(median(a)).toFixed(1)} MiB/s, whole-stream slot ${mibs(median(b)).toFixed(1)} MiB/s: ${ratio.toFixed(3)}x (target ≥ 0.9); by CPU time ${cpuRatio.toFixed(3)}x`,
    );
    result[`${kind}CpuRatio`] = Number(cpuRatio.toFixed(3));
    result[`${kind}FairMiBs`] = Number(mibs(median(a)).toFixed(1));
    result[`${kind}WholeStreamMiBs`] = Number(mibs(median(b)).toFixed(1));
    result[`${kind}Ratio`] = Number(ratio.toFixed(3));
  }
  console.log(JSON.stringify(result));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
