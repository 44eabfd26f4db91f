/**
 * `extends`: a policy file layered over another one (the strict profile over the default
 * policy), with every issue still naming the file and line that holds it.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { decide } from "./decide.ts";
import { parsePolicy, readPolicyFile } from "./policy-loader.ts";
import { assess, compileRisk } from "./risk.ts";

const STRICT = fileURLToPath(new URL("../../deploy/policies/strict.yaml", import.meta.url));
const DEFAULT = fileURLToPath(new URL("../../policy.yaml", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "agentd-extends-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string): string => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

describe("the strict profile (deploy/policies/strict.yaml)", () => {
  const strict = readPolicyFile(STRICT);
  const base = readPolicyFile(DEFAULT);
  it("loads, layered over the default policy", () => {
    assert.ok(strict.ok && base.ok, JSON.stringify(strict.ok ? "" : strict.errors));
    assert.deepEqual(strict.policy.risk, base.policy.risk, "the default's risk rules");
    assert.deepEqual(strict.policy.redaction, base.policy.redaction);
    // The default's sandbox, but a run's own image only pinned by digest.
    assert.deepEqual(strict.policy.sandbox, { ...base.policy.sandbox, imageDigests: true });
    assert.deepEqual(strict.policy.trust.rules, [], "no adaptive trust");
  });

  it("asks a person for every mutation and lets reads run", () => {
    assert.ok(strict.ok);
    const p = strict.policy;
    const compiled = compileRisk(p);
    const path = (tool: string, input: Record<string, unknown>) =>
      decide(tool, assess(tool, input, p, compiled), p, {}).path;
    assert.equal(path("repo.read", { path: "src/a.ts" }), "auto");
    assert.equal(path("repo.search", { query: "x" }), "auto");
    assert.equal(path("repo.read", { path: ".env" }), "preview+approval");
    const patch = { path: "a.txt", edits: [{ oldText: "a", newText: "b" }] };
    for (const [tool, input] of [
      ["repo.patch", patch],
      ["process.run", { command: "ls" }],
      ["process.run", { command: "echo hi" }],
      ["test.run", {}],
      ["lint.run", {}],
    ] as const)
      assert.equal(path(tool, input), "preview+approval", `${tool} ${JSON.stringify(input)}`);
    // Deny rules still deny (an approval never unlocks them).
    assert.equal(path("process.run", { command: "sudo ls" }), "deny");
  });
});

describe("extends", () => {
  it("merges mappings key by key and replaces lists", () => {
    const b = file("b.yaml", "version: 1\nworkspace:\n  root: /src\n  denyPatterns: [a, b]\n");
    const c = file(
      "c.yaml",
      `version: 1\nextends: ${b}\nworkspace:\n  denyPatterns: [c]\nlimits:\n  maxStdout: 2MiB\n`,
    );
    const r = readPolicyFile(c);
    assert.ok(r.ok, JSON.stringify(r.ok ? "" : r.errors));
    assert.equal(r.policy.workspace.root, "/src");
    assert.deepEqual(r.policy.workspace.denyPatterns, ["c"]);
    assert.equal(r.policy.limits.maxStdout, 2 * 1024 * 1024);
  });

  it("names the file and line of an issue in either layer", () => {
    const b = file("bad-base.yaml", "version: 1\nsandbox:\n  cpu: many\n");
    const c = file(
      "bad-child.yaml",
      `version: 1\nextends: ./bad-base.yaml\ncapabilities:\n  repo.patch: { approval: maybe }\n`,
    );
    const r = readPolicyFile(c);
    assert.ok(!r.ok);
    const where = r.errors.map((e) => [e.file, e.line, e.field]);
    assert.deepEqual(where, [
      [b, 3, "sandbox.cpu"],
      [c, 4, "capabilities.repo.patch.approval"],
    ]);
  });

  it("refuses cycles, missing files, bad values and extends without a file", () => {
    const a = join(dir, "cyc-a.yaml");
    file("cyc-a.yaml", "version: 1\nextends: ./cyc-b.yaml\n");
    file("cyc-b.yaml", "version: 1\nextends: ./cyc-a.yaml\n");
    const cyc = readPolicyFile(a);
    assert.ok(!cyc.ok && /cycle/.test(cyc.errors[0]?.message ?? ""), JSON.stringify(cyc));
    const missing = readPolicyFile(file("m.yaml", "version: 1\nextends: ./nope.yaml\n"));
    assert.ok(!missing.ok);
    assert.deepEqual([missing.errors[0]?.field, missing.errors[0]?.line], ["extends", 2]);
    assert.match(missing.errors[0]?.message ?? "", /cannot read .*nope\.yaml: ENOENT/);
    const num = readPolicyFile(file("n.yaml", "version: 1\nextends: 7\n"));
    assert.ok(!num.ok && /expected the path of a policy file/.test(num.errors[0]?.message ?? ""));
    file("list.yaml", "- a\n");
    const list = readPolicyFile(file("l.yaml", "version: 1\nextends: ./list.yaml\n"));
    assert.ok(!list.ok && /must be a mapping/.test(list.errors[0]?.message ?? ""));
    const text = parsePolicy("version: 1\nextends: ./x.yaml\n", "inline");
    assert.ok(!text.ok && /only a policy loaded from a file/.test(text.errors[0]?.message ?? ""));
  });

  it("stops a long chain", () => {
    let prev = file("chain-0.yaml", "version: 1\n");
    for (let i = 1; i <= 5; i++)
      prev = file(`chain-${i}.yaml`, `version: 1\nextends: ./chain-${i - 1}.yaml\n`);
    const r = readPolicyFile(prev);
    assert.ok(!r.ok && /more than 4 files/.test(r.errors[0]?.message ?? ""), JSON.stringify(r));
  });
});
