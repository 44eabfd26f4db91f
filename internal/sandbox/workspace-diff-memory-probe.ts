/**
 * Run by workspace-diff-memory.test.ts in a child process (so no other test disturbs the
 * figures): diffs a workspace holding one huge file, streamed from a generator as a tar
 * (tar-stream's pack; no real file), and prints the memory it took as JSON.
 * Usage: node workspace-diff-memory-probe.ts changed|unchanged|control <file bytes>
 * (control: a changed file under a limit it fits, which must be held: proves the figures
 * see buffering).
 *
 * For tests only: never imported by production code.
 */
import * as tar from "tar-stream";
import { isAgentdError } from "../errors.ts";
import type { WorkspaceFile } from "./workspace-archive.ts";
import { diffWorkspace } from "./workspace-diff.ts";

const MiB = 1024 * 1024;
const mode = process.argv[2];
const size = Number(process.argv[3]);
/** The repeating content of the big file. */
const block = Buffer.alloc(MiB);
for (let i = 0; i < block.length; i++) block[i] = (i * 31 + (i >> 10)) & 0xff;

/** A tar of `big.bin` (`size` bytes of `block`) and a small file, made as it is read. */
async function* bigTar(small: string): AsyncGenerator<Uint8Array> {
  const pack = tar.pack();
  const fill = async () => {
    const entry = pack.entry({ name: "big.bin", size, mode: 0o644 });
    for (let n = 0; n < size; n += block.length) {
      const ok = entry.write(block.subarray(0, Math.min(block.length, size - n)));
      if (!ok) await new Promise<void>((r) => entry.once("drain", () => r()));
    }
    entry.end(null);
    pack.entry({ name: "small.txt" }, small);
    pack.finalize();
  };
  void fill();
  yield* pack as AsyncIterable<Uint8Array>;
}

const base: WorkspaceFile[] = [
  { path: "small.txt", type: "file", mode: 0o644, data: Buffer.from("before\n") },
];
if (mode === "unchanged") {
  const data = Buffer.allocUnsafe(size);
  data.fill(block);
  base.push({ path: "big.bin", type: "file", mode: 0o644, data });
}

globalThis.gc?.();
const before = process.memoryUsage();
let peakRss = before.rss;
let peakArrayBuffers = before.arrayBuffers;
let samples = 0;
const sample = () => {
  const m = process.memoryUsage();
  peakRss = Math.max(peakRss, m.rss);
  peakArrayBuffers = Math.max(peakArrayBuffers, m.arrayBuffers);
  samples++;
};
// The diff may run on microtasks alone for long stretches: sample on every chunk read too.
const sampler = setInterval(sample, 10);
async function* sampled(source: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  let n = 0;
  for await (const c of source) {
    if (n++ % 16 === 0) sample();
    yield c;
  }
}
const t0 = performance.now();
let outcome: Record<string, unknown>;
try {
  const r = await diffWorkspace({
    base,
    openExport: () => sampled(bigTar("after\n")),
    maxPatchBytes: mode === "control" ? 4 * size : 64 * MiB,
  });
  outcome = { modified: r.modified, added: r.added, patchBytes: r.patch.length };
} catch (err) {
  outcome = isAgentdError(err)
    ? { code: err.code, field: err.field, message: err.message }
    : { error: String(err) };
}
clearInterval(sampler);
console.log(
  JSON.stringify({
    ...outcome,
    ms: Math.round(performance.now() - t0),
    samples,
    rssGrowth: peakRss - before.rss,
    arrayBuffersGrowth: peakArrayBuffers - before.arrayBuffers,
  }),
);
