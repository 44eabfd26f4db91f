/**
 * assess() is total: oversize and random inputs for every tool come back as a decision
 * (a deny naming the field when the input cannot be assessed), never as a thrown error; the
 * command analysis survives random shell text; and ordinary calls stay well under 1 ms.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { analyzeCommand } from "./command-analysis.ts";
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
  it("analyses random shell text without throwing, in bounded time", () => {
    const rnd = prng(0x5eed);
    const atoms = [
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
    for (let n = 0; n < 1500; n++) {
      let line = "";
      const len = 1 + Math.floor(rnd() * 60);
      for (let k = 0; k < len; k++) line += atoms[Math.floor(rnd() * atoms.length)];
      const started = performance.now();
      const a = analyzeCommand(line);
      assert.ok(Array.isArray(a.commands));
      assert.ok(performance.now() - started < 200, `slow: ${JSON.stringify(line)}`);
    }
  });
  it("stays bounded on pathological lines", () => {
    const lines = [
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
    ];
    for (const command of lines) {
      const started = performance.now();
      const { d } = total("process.run", { command });
      assert.ok(performance.now() - started < 1500, `${command.slice(0, 20)}… took too long`);
      assert.notEqual(d.path, "auto");
    }
  });
});

describe("assess is fast for ordinary calls", () => {
  it("averages well under 1 ms per ordinary command", () => {
    const ordinary = [
      "npm test",
      "ls -la src",
      "git status",
      "cat README.md",
      "grep -rn foo src",
      "sed -n 1,20p a.ts",
      "awk '{print $1}' f",
      "cd pkg && npm test 2>&1 | tail -50",
    ];
    for (let i = 0; i < 200; i++) for (const command of ordinary) total("process.run", { command });
    const rounds = 500;
    const started = performance.now();
    for (let i = 0; i < rounds; i++)
      for (const command of ordinary) total("process.run", { command });
    const mean = (performance.now() - started) / (rounds * ordinary.length);
    // Two shared cores: the bound leaves room for a busy machine; typical is ~0.03 ms.
    assert.ok(mean < 0.5, `mean ${mean.toFixed(4)} ms`);
  });
});

function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

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
