#!/usr/bin/env node
/**
 * Workspace-diff benchmark: `node bench/workspace-diff.ts [--rounds N]` (what `make bench`
 * runs; never run by the tests). Measures `diffWorkspace` alone over 10,000 small files
 * (950 changed, 500 new, 500 gone): the export tar is made before the clock starts, since
 * the sandbox makes it, not the diff. The test of the same case
 * (internal/sandbox/workspace-diff.test.ts) checks the result and no longer times it.
 *
 * Prints the median and the slowest round, then one JSON line. Exit status 1 when a round's
 * counts are wrong; a slow figure is reported, not fatal. Must never: be run by the tests.
 */
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { diffWorkspace } from "../internal/sandbox/workspace-diff.ts";
import { filesOf, type Item, tarBytes } from "../internal/sandbox/workspace-diff-fixtures.ts";

const { values } = parseArgs({ options: { rounds: { type: "string", default: "5" } } });
const rounds = Number(values.rounds);
if (!Number.isInteger(rounds) || rounds < 1) {
  console.error(`--rounds: want a positive integer, got ${values.rounds}`);
  process.exit(2);
}

const text = (path: string, data: string): Item => ({ path, data, mode: 0o644 });
const base = Array.from({ length: 10_000 }, (_, i) => text(`d${i % 100}/f${i}.txt`, `v${i}\n`));
const current = [
  ...base.slice(500).map((f, i) => (i % 10 === 0 ? text(f.path, `changed ${i}\n`) : f)),
  ...Array.from({ length: 500 }, (_, i) => text(`n${i % 50}/g${i}.txt`, `n${i}\n`)),
];
const exported = await tarBytes(current);
const files = filesOf(base);

async function* once(b: Uint8Array): AsyncGenerator<Uint8Array> {
  yield b;
}

const ms: number[] = [];
let wrong = 0;
for (let i = 0; i < rounds; i++) {
  const t0 = performance.now();
  const r = await diffWorkspace({
    base: files,
    openExport: () => once(exported),
    maxPatchBytes: 64 * 1024 * 1024,
  });
  ms.push(performance.now() - t0);
  if (r.modified.length !== 950 || r.added.length !== 500 || r.deleted.length !== 500) wrong++;
}
ms.sort((a, b) => a - b);
const median = ms[Math.floor(ms.length / 2)] as number;
const max = ms[ms.length - 1] as number;
console.log(`10,000 files (950 changed, 500 new, 500 gone), ${rounds} rounds`);
console.log(`  median ${median.toFixed(0)} ms, slowest ${max.toFixed(0)} ms`);
console.log(
  JSON.stringify({ bench: "workspace-diff", rounds, medianMs: median, maxMs: max, wrong }),
);
if (wrong > 0) process.exit(1);
