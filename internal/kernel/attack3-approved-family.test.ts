/**
 * Attack: a person approves `git push origin feature` and asks for a rule; an admin applies
 * the derived family `git push` for the repository. The model then force-pushes, deletes a
 * remote branch or mirrors — and none of it waits for a person.
 *
 * Why it gets through: approved-commands.ts approvedCommandRule() relaxes the
 * highRiskCommand fact (RELAXABLE) for every line whose words start with the family's,
 * and plainWords() keeps only lines the analysis calls destructive out of a family. The
 * analysis (command-destroys.ts) does not call `git push --force`, `+ref`, `--delete`,
 * `:ref` or `--mirror` destructive (only risk.highRiskCommands matches `git push`), so
 * `git push --force origin main` is "git push" to the rule and runs `preview+auto`. The
 * family is wider than the call the person saw: they approved a push of a new branch,
 * not a rewrite or deletion of the remote's history.
 *
 * What must hold (docs/policy.md "Rules from approvals", issue #29): a rule never covers
 * more than the call a person saw; a destructive form of the family (force, delete,
 * mirror) still asks a person.
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { pickCommands } from "../tools/command-spec.ts";
import { commandFamily } from "./approved-commands.ts";
import { decide } from "./decide.ts";
import { readPolicyFile } from "./policy-loader.ts";
import { assess, compileRisk } from "./risk.ts";

const ROOT = join(import.meta.dirname, "..", "..");

function policyWithRule(rule: string) {
  const dir = mkdtempSync(join(tmpdir(), "agentd-attack3-family-"));
  const file = join(dir, "policy.yaml");
  writeFileSync(
    file,
    [
      "version: 1",
      `extends: ${join(ROOT, "policy.yaml")}`,
      "approvedCommands:",
      `  - command: ${rule}`,
      "    repo: web",
    ].join("\n"),
  );
  const r = readPolicyFile(file);
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.policy;
}

describe("attack3: a family rule from an approved push covers force pushes and deletions", () => {
  it("the approved call gives the family `git push`", () => {
    assert.deepEqual(commandFamily("git push origin feature"), { words: ["git", "push"] });
  });

  for (const line of [
    "git push --force origin main",
    "git push -f origin main",
    "git push origin +main",
    "git push --delete origin main",
    "git push origin :main",
    "git push --mirror origin",
    "git push --force-with-lease origin main",
  ]) {
    it(`${line}: still asks a person under the applied rule`, () => {
      const policy = policyWithRule("git push");
      const a = assess(
        "process.run",
        { command: line },
        policy,
        compileRisk(policy),
        pickCommands(policy.tools, undefined),
      );
      const d = decide("process.run", a, policy, {}, { repo: "web", line });
      assert.equal(d.path, "preview+approval", `decided ${d.path} by ${d.rule}`);
    });
  }
});
