/**
 * The policy digest covers the canonical form: reformatting and reordering the YAML keep
 * it, writing a default out or a size in other units keeps it, `extends` is resolved
 * before hashing, and every semantic change moves it.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { canonicalPolicyJson, policyDigest } from "./policy-digest.ts";
import { parsePolicy, readPolicyFile } from "./policy-loader.ts";
import type { Policy } from "./policy-schema.ts";

const load = (text: string): Policy => {
  const r = parsePolicy(text, "p.yaml");
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.policy;
};

const BASE = `version: 1
capabilities:
  repo.read: {approval: never}
  process.run: {approval: risk}
risk:
  denyCommands: [rm, dd]
  secretPaths: [".env"]
limits:
  maxStdout: 1MiB
`;

const dir = mkdtempSync(join(tmpdir(), "agentd-digest-"));
after(() => rmSync(dir, { recursive: true, force: true }));

describe("policyDigest", () => {
  it("is sha256 hex of the canonical JSON (keys sorted, no whitespace)", () => {
    const p = load(BASE);
    const json = canonicalPolicyJson(p);
    assert.equal(policyDigest(p), createHash("sha256").update(json).digest("hex"));
    assert.match(policyDigest(p), /^[0-9a-f]{64}$/);
    assert.ok(json.indexOf('"capabilities"') < json.indexOf('"limits"'));
    assert.doesNotMatch(json, /\s"/);
  });

  it("does not change when the YAML is reformatted, reordered, or spells out a default or a size", () => {
    const a = policyDigest(load(BASE));
    const reordered = `# a comment
limits: {maxStdout: 1048576}
risk:
  secretPaths:
    - .env
  denyCommands:
    - rm
    - dd
capabilities:
  process.run:
    approval: risk
  repo.read:
    approval: never
version: 1
workspace:
  denyPatterns: ["**/.git", "**/.git/**"]
`;
    assert.equal(policyDigest(load(reordered)), a);
  });

  it("changes with every semantic change", () => {
    const a = policyDigest(load(BASE));
    const changes = [
      BASE.replace("approval: never", "approval: always"),
      BASE.replace("[rm, dd]", "[rm]"),
      BASE.replace("[rm, dd]", "[dd, rm]"), // a list's order is kept as written
      BASE.replace('[".env"]', '[".env", "secrets/**"]'),
      BASE.replace("1MiB", "2MiB"),
      `${BASE}sandbox: {network: allowlist, allowlist: [registry.npmjs.org]}\n`,
    ];
    const seen = new Set([a]);
    for (const text of changes) {
      const d = policyDigest(load(text));
      assert.ok(!seen.has(d), `digest unchanged for:\n${text}`);
      seen.add(d);
    }
  });

  it("resolves extends first: a layered file and the same policy written flat have one digest", () => {
    writeFileSync(join(dir, "base.yaml"), BASE);
    writeFileSync(join(dir, "child.yaml"), "extends: base.yaml\nrisk:\n  denyCommands: [rm]\n");
    const child = readPolicyFile(join(dir, "child.yaml"));
    assert.ok(child.ok);
    const flat = load(BASE.replace("[rm, dd]", "[rm]"));
    assert.equal(policyDigest(child.policy), policyDigest(flat));
    assert.notEqual(policyDigest(child.policy), policyDigest(load(BASE)));
  });

  it("is computed once per loaded policy (the same object answers the cached digest)", () => {
    const p = load(BASE);
    const first = policyDigest(p);
    assert.equal(policyDigest(p), first);
    // A fresh load of the same text is another object with the same digest.
    assert.equal(policyDigest(load(BASE)), first);
  });
});
