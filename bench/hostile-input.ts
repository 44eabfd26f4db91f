#!/usr/bin/env node
/**
 * Hostile-input benchmark: `node bench/hostile-input.ts [--rounds N]` (what `make bench`
 * runs; never run by the tests). The figures the tests no longer assert: how long
 * redaction takes on 1 MiB of tool output and on text shaped to make a scanner backtrack
 * (and how that grows from 512 KiB to 4 MiB: linear work grows 8x, quadratic 64x), how long
 * the command analysis takes on random shell text and pathological lines, and how long a
 * skill selection with catastrophic regex triggers takes to interrupt them.
 * internal/kernel/redaction.test.ts and assess-totality.test.ts show the same work ends
 * (in a worker under a 60 s cap); skills.test.ts that the triggers are reported.
 *
 * Prints one line per case (best of N rounds), then one JSON line. Exit status 1 when a
 * result is wrong (a value leaked, an analysis failed); a slow figure is reported, not fatal.
 * Must never: be run by the tests.
 */
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { selectSkills } from "../internal/engine/skills.ts";
import {
  analyzeRandomLines,
  decidePathological,
  PATHOLOGICAL_LINES,
} from "../internal/kernel/command-hostile-fixtures.ts";
import {
  HOSTILE_SHAPES,
  MiB,
  type Redacted,
  redactShape,
  redactToolOutput,
  STREAM_SHAPES,
  streamShape,
  streamToolOutput,
} from "../internal/kernel/redaction-hostile-fixtures.ts";

const { values } = parseArgs({ options: { rounds: { type: "string", default: "3" } } });
const rounds = Number(values.rounds);
if (!Number.isInteger(rounds) || rounds < 1) {
  console.error(`--rounds: want a positive integer, got ${values.rounds}`);
  process.exit(2);
}

let wrong = 0;
const figures: Record<string, number> = {};

/** The best of `rounds` runs of `fn`, ms, after one warm-up run; `check` counts wrong results. */
function best<T>(fn: () => T, check: (r: T) => boolean = () => true): number {
  if (!check(fn())) wrong++;
  let ms = Number.POSITIVE_INFINITY;
  for (let i = 0; i < rounds; i++) {
    const t0 = performance.now();
    const r = fn();
    ms = Math.min(ms, performance.now() - t0);
    if (!check(r)) wrong++;
  }
  return ms;
}

const clean = (r: Redacted): boolean => !r.leaked;

function report(key: string, label: string, ms: number, extra = ""): void {
  figures[key] = Number(ms.toFixed(2));
  console.log(`  ${label.padEnd(58)} ${ms.toFixed(1).padStart(8)} ms${extra}`);
}

/** Times `run(n)` at 512 KiB and at 4 MiB; reports the larger and the growth. */
function growth(key: string, label: string, run: (n: number) => Redacted): void {
  const small = best(() => run(MiB / 2), clean);
  const large = best(() => run(4 * MiB), clean);
  const ratio = large / Math.max(small, 0.5);
  figures[`${key}.growth`] = Number(ratio.toFixed(1));
  report(key, label, large, `  (x${ratio.toFixed(1)} from 512 KiB; linear is x8)`);
}

console.log(`redaction (best of ${rounds})`);
report(
  "redact.output.1MiB",
  "1 MiB of tool output, 5 values, keys and patterns",
  best(() => redactToolOutput(MiB), clean),
);
report(
  "stream.output.1MiB",
  "1 MiB of tool output streamed in chunks of 512",
  best(() => streamToolOutput(MiB), clean),
);
for (const label of Object.keys(HOSTILE_SHAPES))
  growth(`redact.${label}`, `4 MiB of ${label}`, (n) => redactShape(label, n));
for (const label of Object.keys(STREAM_SHAPES))
  growth(`stream.${label}`, `4 MiB streamed, flushed per chunk: ${label}`, (n) =>
    streamShape(label, n),
  );

console.log(`command analysis (best of ${rounds})`);
report(
  "analysis.random.1500",
  "1500 random shell lines",
  best(
    () => analyzeRandomLines(0x5eed, 1500),
    (f) => f.length === 0,
  ),
);
for (const [i, line] of PATHOLOGICAL_LINES.entries())
  report(
    `decide.pathological.${i}`,
    `decision on ${JSON.stringify(line.slice(0, 16))}… (${line.length} chars)`,
    best(
      () => decidePathological(i),
      (d) => d.path !== "auto",
    ),
  );

console.log(`skill triggers (best of ${rounds})`);
const trigger = (name: string, re: string) => ({
  name,
  description: name,
  version: "1",
  triggers: [re],
  body: name,
  source: `workspace:.skills/${name}/SKILL.md`,
});
report(
  "skills.catastrophic",
  "a selection with two catastrophic regex triggers",
  best(
    () =>
      selectSkills(
        [trigger("evil", "/^(a+)+$/"), trigger("evil2", "/^(a|aa)+$/"), trigger("fine", "/a{3}/")],
        {
          named: [],
          prompt: `${"a".repeat(40)}!`,
        },
      ),
    // "fine" may be left out too when the two used up the selection's whole budget.
    (sel) => sel.dropped.filter((d) => d.name.startsWith("evil")).length === 2,
  ),
);

console.log(JSON.stringify({ bench: "hostile-input", rounds, figures, wrong }));
if (wrong > 0) process.exit(1);
