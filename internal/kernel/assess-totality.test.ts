/**
 * assess() is total: oversize and random inputs for every tool come back as a decision
 * (a deny naming the field when the input cannot be assessed), never as a thrown error; the
 * command analysis survives random shell text and pathological lines, and ends on them (in a
 * worker under a hard cap; how fast is bench/hostile-input.ts's and bench/kernel.ts's figure).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { finishesUnderCap } from "../testing/hard-cap.ts";
import { PATHOLOGICAL_LINES, prng } from "./command-hostile-fixtures.ts";
import { decide } from "./decide.ts";
import { parsePolicy } from "./policy-loader.ts";
import type { Policy } from "./policy-schema.ts";
import { applyProvenance } from "./provenance.ts";
import { assess, compileRisk } from "./risk.ts";

const parsed = parsePolicy(
  readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8"),
  "p",
);
if (!parsed.ok) throw new Error("policy.yaml does not parse");
const policy: Policy = {
  ...parsed.policy,
  tools: { test: "npm test -- {name}", lint: "npm run lint" },
};
const compiled = compileRisk(policy);
const TOOLS = ["process.run", "test.run", "lint.run", "repo.read", "repo.search", "repo.patch"];
const PATHS = ["auto", "preview+auto", "preview+approval", "deny"];
const MB = "x".repeat(1024 * 1024);
const FIXTURES = new URL("./command-hostile-fixtures.ts", import.meta.url);

function total(tool: string, input: unknown, p: Policy = policy) {
  const a = assess(
    tool,
    input as Record<string, unknown>,
    p,
    p === policy ? compiled : compileRisk(p),
  );
  const d = decide(tool, applyProvenance(a, new Set(["s.sh"]), p), p, {});
  assert.ok(PATHS.includes(d.path), `${tool}: ${JSON.stringify(d).slice(0, 200)}`);
  return { a, d };
}

describe("assess is total", () => {
  it("refuses oversize paths and command lines, naming the field", () => {
    const cases: [string, Record<string, unknown>, string][] = [
      ["process.run", { command: MB }, "command"],
      ["process.run", { command: "ls", cwd: MB }, "cwd"],
      ["repo.read", { path: MB }, "path"],
      ["repo.read", { path: `a/${"b".repeat(70 * 1024)}` }, "path"],
      ["repo.patch", { path: MB, edits: [{ oldText: "", newText: "x" }] }, "path"],
      ["test.run", { name: MB }, "name"],
    ];
    for (const [tool, input, field] of cases) {
      const { d } = total(tool, input);
      assert.equal(d.path, "deny", `${tool} ${field}`);
      assert.match(d.rule, /^(input\.schema|jail)$/);
      assert.match(d.reason, new RegExp(`^${field}\\b`));
    }
  });
  it("refuses a policy test or lint command over the limit", () => {
    const big: Policy = { ...policy, tools: { test: MB, lint: MB } };
    for (const tool of ["test.run", "lint.run"]) {
      const { d } = total(tool, {}, big);
      assert.equal(d.path, "deny");
      assert.match(d.reason, /tools\.(test|lint)/);
    }
  });
  it("decides on 1 MB values in every field of every tool", () => {
    const inputs: [string, Record<string, unknown>][] = [
      ["repo.search", { query: MB, globs: [MB, MB] }],
      [
        "repo.patch",
        { path: "a.ts", unifiedDiff: `--- a/a.ts\n+++ b/a.ts\n${"+x\n".repeat(300_000)}` },
      ],
      ["repo.patch", { path: "a.ts", edits: [{ oldText: MB, newText: MB }] }],
      ["lint.run", { timeoutMs: 1e300 }],
      ["process.run", { command: `ls ${"a ".repeat(8000)}` }],
    ];
    for (const [tool, input] of inputs) total(tool, input);
  });
  it("decides on wrongly typed and hostile inputs", () => {
    const hostile: unknown[] = [
      {},
      { command: 42 },
      { command: null },
      { command: ["rm", "x"] },
      { command: { toString: () => "rm x" } },
      {
        path: {
          toString: () => {
            throw new Error("boom");
          },
        },
      },
      { path: Symbol("x") },
      { command: "ls", cwd: 5 },
      { name: 7 },
      { edits: "x", path: "a" },
      { edits: [null], path: "a" },
      { edits: [{ oldText: 1, newText: 2 }], path: "a" },
      { globs: "x" },
      { unifiedDiff: 5, path: "a" },
      { big: 10n },
      new Proxy(
        {},
        {
          get: () => {
            throw new Error("trap");
          },
        },
      ),
      null,
    ];
    for (const tool of TOOLS) for (const input of hostile) total(tool, input);
  });
  it("decides on seeded random inputs for every tool", () => {
    const rnd = prng(0xa9e7d);
    for (let n = 0; n < 400; n++) {
      for (const tool of TOOLS) {
        const input: Record<string, unknown> = {};
        for (const f of [
          "command",
          "cwd",
          "path",
          "name",
          "query",
          "globs",
          "unifiedDiff",
          "edits",
        ])
          if (rnd() < 0.5) input[f] = randomValue(rnd, 2);
        total(tool, input);
      }
    }
  });
  it("analyses random shell text without throwing, and ends", async () => {
    // In a worker under a hard cap: only analysis that never ends (exponential, a loop)
    // fails it, not a loaded machine. bench/hostile-input.ts has the slowest line's time.
    const failed = await finishesUnderCap<string[]>(
      "analysing 1500 random shell lines",
      FIXTURES,
      "analyzeRandomLines",
      [0x5eed, 1500],
    );
    assert.deepEqual(failed, []);
  });
  for (const [i, line] of PATHOLOGICAL_LINES.entries()) {
    it(`decides on a pathological line, and ends: ${JSON.stringify(line.slice(0, 16))}…`, async () => {
      const d = await finishesUnderCap<{ path: string; rule: string }>(
        `deciding on ${JSON.stringify(line.slice(0, 20))}… (${line.length} chars)`,
        FIXTURES,
        "decidePathological",
        [i],
      );
      assert.ok(PATHS.includes(d.path), JSON.stringify(d));
      assert.notEqual(d.path, "auto", JSON.stringify(d));
    });
  }
});

// How fast ordinary calls are decided is bench/kernel.ts's figure (p50/p99 per decision).

function randomValue(rnd: () => number, depth: number): unknown {
  const r = rnd();
  if (r < 0.45) {
    const chars = "ab./-_$`'\"\\\n\t *?[]{}~;|&<>()#=\u0000\u00a0\ud800é";
    let s = "";
    const len = Math.floor(rnd() * (rnd() < 0.05 ? 20000 : 40));
    for (let k = 0; k < len; k++) s += chars[Math.floor(rnd() * chars.length)];
    return s;
  }
  if (r < 0.55) return Math.floor(rnd() * 1e6) - 5e5;
  if (r < 0.6) return null;
  if (r < 0.65) return rnd() < 0.5;
  if (depth <= 0) return undefined;
  if (r < 0.85)
    return Array.from({ length: Math.floor(rnd() * 4) }, () => randomValue(rnd, depth - 1));
  return { oldText: randomValue(rnd, depth - 1), newText: randomValue(rnd, depth - 1) };
}
