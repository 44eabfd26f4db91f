/**
 * process.run's argv form (no shell, for images without one): its input is checked (one of
 * command or argv, a program, bounded), and the kernel judges it as the command line whose
 * words are exactly the argv — a deny rule or a risky program is caught either way.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { decide } from "../kernel/decide.ts";
import { parsePolicy } from "../kernel/policy-loader.ts";
import { assess, compileRisk } from "../kernel/risk.ts";
import { processRun } from "./process-run.ts";
import { argvLine } from "./run-command.ts";

const parsed = parsePolicy(
  readFileSync(new URL("../../policy.yaml", import.meta.url), "utf8"),
  "policy.yaml",
);
if (!parsed.ok) throw new Error("policy.yaml does not parse");
const policy = parsed.policy;
const compiled = compileRisk(policy);
const path = (input: Record<string, unknown>) =>
  decide("process.run", assess("process.run", input, policy, compiled), policy, {}).path;

describe("process.run argv", () => {
  it("takes command or argv, never both or neither, with a program, bounded", () => {
    const ok = (i: unknown) => processRun.input.safeParse(i).success;
    assert.ok(ok({ command: "ls" }));
    assert.ok(ok({ argv: ["ls", "-l"] }));
    assert.ok(!ok({ command: "ls", argv: ["ls"] }), "both");
    assert.ok(!ok({}), "neither");
    assert.ok(!ok({ argv: [] }), "no program");
    assert.ok(!ok({ argv: [""] }), "an empty program");
    assert.ok(!ok({ argv: Array.from({ length: 257 }, () => "a") }), "too many words");
    assert.ok(!ok({ argv: ["a", "b".repeat(16 * 1024)] }), "too long as a line");
    assert.ok(!ok({ argv: ["ls", 3] }), "a word that is not a string");
  });

  it("is judged as the line of its words", () => {
    assert.equal(
      argvLine(["python3", "-m", "pytest", "-k", "a b", "it's"]),
      `python3 -m pytest -k 'a b' 'it'\\''s'`,
    );
    assert.equal(path({ argv: ["ls", "-l"] }), path({ command: "ls -l" }));
    assert.equal(path({ argv: ["sudo", "ls"] }), "deny");
    assert.equal(
      path({ argv: ["sh", "-c", "sudo ls"] }),
      "deny",
      "a shell's script is looked into",
    );
    assert.equal(path({ argv: ["git", "push"] }), path({ command: "git push" }));
    // A word with shell syntax is one word, not a pipeline: quoted, it stays an argument.
    assert.equal(path({ argv: ["echo", "a; sudo ls"] }), path({ command: "echo 'a; sudo ls'" }));
  });
});
