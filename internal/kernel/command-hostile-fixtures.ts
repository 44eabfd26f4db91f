/**
 * Test fixtures for the command analysis on hostile input: seeded random shell text and
 * pathological lines (deep nesting, thousands of quotes, wrappers and globs), with the
 * functions that run them. assess-totality.test.ts runs those functions in a worker under
 * a generous hard cap (work that never ends fails it, a slow machine does not);
 * bench/hostile-input.ts times the same work.
 *
 * For tests and benchmarks only; it must never be imported by production code.
 */
import { readFileSync } from "node:fs";
import { analyzeCommand } from "./command-analysis.ts";
import { decide } from "./decide.ts";
import { parsePolicy } from "./policy-loader.ts";
import type { Policy } from "./policy-schema.ts";
import { applyProvenance } from "./provenance.ts";
import { assess, compileRisk } from "./risk.ts";

/** A small seeded PRNG (mulberry32): the same inputs on every run. */
export function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ATOMS = [
  "rm",
  "sh",
  "-c",
  "'",
  '"',
  "`",
  "$(",
  ")",
  "(",
  "${",
  "}",
  "{",
  "|",
  "&&",
  ";",
  "\n",
  "\\",
  "<<",
  "EOF",
  ">",
  "<",
  "#",
  "*",
  "?",
  "[",
  "]",
  "~",
  "$",
  "a",
  " ",
  "\t",
  "case",
  "in",
  "esac",
  ";;",
  "=",
  "find",
  "-exec",
  "busybox",
  "awk",
  "sed",
  "e",
  "$'",
  "<(",
  "cd",
  "..",
  "/",
];

/** `n` lines of 1 to 60 random shell atoms each, from `seed`. */
export function randomShellLines(seed: number, n: number): string[] {
  const rnd = prng(seed);
  const lines: string[] = [];
  for (let i = 0; i < n; i++) {
    let line = "";
    const len = 1 + Math.floor(rnd() * 60);
    for (let k = 0; k < len; k++) line += ATOMS[Math.floor(rnd() * ATOMS.length)];
    lines.push(line);
  }
  return lines;
}

/** Lines built to make a careless analysis recurse, backtrack or rescan without end. */
export const PATHOLOGICAL_LINES: readonly string[] = [
  "$(".repeat(5000),
  "`".repeat(5001),
  "sh -c '".repeat(2000),
  `${"env ".repeat(4000)}rm x`,
  "a;".repeat(8000),
  "{a,b}".repeat(40),
  `cat ${"*/".repeat(3000)}.env`,
  `cat .${"[a-z]".repeat(3000)}`,
  "\\\n".repeat(8000),
  "x<<E\n".repeat(3000),
  `awk '${"/".repeat(16000)}'`,
  `sed '${"s/a/b/;".repeat(2000)}'`,
  // Globs compared with every build, config and secret path: long segments, many stars.
  `cp p.txt ${"*?".repeat(500)}.json`,
  `cp p.txt ${"[!a]*".repeat(200)}`,
  `cp p.txt ${"*/".repeat(500)}package.json`,
  `find . -name '${"*a".repeat(500)}'`,
  // Emptying forms, many times over.
  ": > f;".repeat(4000),
  `sed -i '${"/x/d;".repeat(3000)}' f`,
  `tee ${"f ".repeat(5000)}`,
];

/**
 * Analyses `randomShellLines(seed, n)`; the lines whose analysis gave no command list
 * (none, when the analysis is total).
 */
export function analyzeRandomLines(seed: number, n: number): string[] {
  return randomShellLines(seed, n).filter((line) => !Array.isArray(analyzeCommand(line).commands));
}

let policy: Policy | undefined;

/** The repository's policy.yaml with a test and a lint command, parsed once. */
export function repoPolicy(): Policy {
  if (policy !== undefined) return policy;
  const parsed = parsePolicy(
    readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8"),
    "policy.yaml",
  );
  if (!parsed.ok) throw new Error("policy.yaml does not parse");
  policy = { ...parsed.policy, tools: { test: "npm test -- {name}", lint: "npm run lint" } };
  return policy;
}

/** The decision on `process.run` of `PATHOLOGICAL_LINES[i]` under the repository's policy. */
export function decidePathological(i: number): { path: string; rule: string } {
  const p = repoPolicy();
  const command = PATHOLOGICAL_LINES[i] as string;
  const a = assess("process.run", { command }, p, compileRisk(p));
  const d = decide("process.run", applyProvenance(a, new Set(["s.sh"]), p), p, {});
  return { path: d.path, rule: d.rule };
}
