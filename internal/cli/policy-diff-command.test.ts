/**
 * `agentd policy diff A B` through the real binary: differences by rule in words, exit 0
 * for the same policy (reformatted, reordered, the same file twice, a layered file against
 * its flat form), 1 when they differ, 2 for a file that does not load (named with its
 * line), hostile values escaped, a huge file refused by name.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { AGENTD_BIN } from "../testing/agentd-process.ts";

const dir = mkdtempSync(join(tmpdir(), "agentd-policy-diff-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const write = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};
const diff = (a: string, b: string) =>
  spawnSync(AGENTD_BIN, ["policy", "diff", a, b], {
    encoding: "utf8",
    env: { PATH: process.env.PATH ?? "" },
  });

const A = `version: 1
capabilities:
  repo.patch: {approval: risk}
  process.run: {approval: risk}
risk:
  denyCommands: [sudo, curl]
  secretPaths: [".env"]
network:
  allow: [registry.npmjs.org]
sandbox: {network: allowlist}
trust:
  rules:
    - {name: patch-ok, tool: repo.patch, when: {successfulCalls: {gte: 20}}, then: relax}
`;

describe("agentd policy diff", () => {
  it("exits 0 for the same policy: reformatted and reordered, and the same file twice", () => {
    const a = write("a.yaml", A);
    const b = write(
      "a-reordered.yaml",
      `# reformatted
sandbox:
  network: allowlist
trust: {rules: [{then: relax, tool: repo.patch, name: patch-ok, when: {successfulCalls: {gte: 20}}}]}
network: {allow: ["registry.npmjs.org"]}
risk: {secretPaths: [.env], denyCommands: [sudo, curl]}
capabilities: {process.run: {approval: risk}, repo.patch: {approval: risk}}
version: 1
`,
    );
    const r = diff(a, b);
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.match(
      r.stdout,
      /^same policy: .*a\.yaml \(sha256 [0-9a-f]{12}\) and .*a-reordered\.yaml/,
    );
    const twice = diff(a, a);
    assert.equal(twice.status, 0, twice.stderr);
  });

  it("a layered file and its flat form are the same policy", () => {
    const base = write("base.yaml", A);
    const child = write("child.yaml", "extends: base.yaml\nrisk:\n  denyCommands: [sudo]\n");
    const flat = write("flat.yaml", A.replace("[sudo, curl]", "[sudo]"));
    assert.equal(diff(child, flat).status, 0);
    assert.equal(diff(base, child).status, 1);
  });

  it("exits 1 and explains each difference by rule", () => {
    const a = write("a2.yaml", A);
    const b = write(
      "b2.yaml",
      A.replace("repo.patch: {approval: risk}", "repo.patch: {approval: always}")
        .replace("  process.run: {approval: risk}\n", "")
        .replace("[sudo, curl]", "[sudo, nc]")
        .replace('[".env"]', '[".env", "secrets/**"]')
        .replace("[registry.npmjs.org]", "[registry.npmjs.org, pypi.org]")
        .replace("gte: 20", "gte: 5")
        .concat("limits: {maxStdout: 2MiB}\n"),
    );
    const r = diff(a, b);
    assert.equal(r.status, 1, r.stderr);
    const lines = r.stdout.trimEnd().split("\n");
    assert.match(lines[0] ?? "", /^--- .*a2\.yaml \(sha256 [0-9a-f]{12}\)$/);
    assert.match(lines[1] ?? "", /^\+\+\+ .*b2\.yaml \(sha256 [0-9a-f]{12}\)$/);
    assert.deepEqual(lines.slice(2).sort(), [
      "capability process.run: no longer listed with its default approval risk (decisions unchanged)",
      "capability repo.patch: approval changed from risk (the risk rules decide) to always (every call waits for a person)",
      "limits.maxStdout: changed from 1048576 to 2097152",
      'network.allow: network host added: "pypi.org"',
      'risk.denyCommands: deny command added: "nc"',
      'risk.denyCommands: deny command removed: "curl"',
      'risk.secretPaths: secret path added: "secrets/**"',
      'trust.rules: trust rule "patch-ok" changed from {"name":"patch-ok","then":"relax","tool":"repo.patch","when":{"successfulCalls":{"gte":20}}} to {"name":"patch-ok","then":"relax","tool":"repo.patch","when":{"successfulCalls":{"gte":5}}}',
    ]);
  });

  it("reports a reordered or repeated list (the digest sees it)", () => {
    const a = write("a3.yaml", A);
    const b = write("b3.yaml", A.replace("[sudo, curl]", "[curl, sudo]"));
    const c = write("c3.yaml", A.replace("[sudo, curl]", "[sudo, curl, curl]"));
    const r1 = diff(a, b);
    assert.equal(r1.status, 1);
    assert.match(r1.stdout, /risk\.denyCommands: same entries in another order/);
    const r2 = diff(a, c);
    assert.equal(r2.status, 1);
    assert.match(r2.stdout, /risk\.denyCommands: same entries, repeated differently/);
  });

  it("exits 2 naming the file and line of a policy that does not load, either side", () => {
    const good = write("good.yaml", A);
    const bad = write("bad.yaml", "version: 1\nsandbox:\n  cpu: many\n");
    for (const [x, y] of [
      [good, bad],
      [bad, good],
    ] as const) {
      const r = diff(x, y);
      assert.equal(r.status, 2, r.stdout);
      assert.equal(r.stdout, "");
      assert.match(
        r.stderr,
        new RegExp(`${bad.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}:3:8: sandbox\\.cpu: `),
      );
    }
    const missing = diff(good, join(dir, "nope.yaml"));
    assert.equal(missing.status, 2);
    assert.match(missing.stderr, /nope\.yaml: \(file\): cannot read the policy/);
  });

  it("refuses a huge file by name, and escapes control characters in values", () => {
    const good = write("good4.yaml", A);
    const huge = write(
      "huge.yaml",
      `version: 1\nrisk:\n  denyCommands:\n${"    - x\n".repeat(2_000_000)}`,
    );
    const r = diff(good, huge);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /huge\.yaml: \(file\): cannot read the policy/);
    const hostile = write(
      "hostile.yaml",
      A.replace("[sudo, curl]", '[sudo, "\\e]0;pwned\\a\\u202e"]'),
    );
    const h = diff(good, hostile);
    assert.equal(h.status, 1, h.stderr);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it checks
    assert.doesNotMatch(h.stdout, /[\x1b\x07\u202e]/);
    assert.match(h.stdout, /deny command added: .*\\u001b\]0;pwned\\u0007\\u202e/);
  });

  it("exits 2 on a usage error", () => {
    const r = spawnSync(AGENTD_BIN, ["policy", "diff", "only-one.yaml"], { encoding: "utf8" });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /usage: agentd policy diff A B/);
  });
});
