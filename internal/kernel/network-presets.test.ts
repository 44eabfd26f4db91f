/**
 * network.presets: each preset's registry hosts join the allowlist (and only with
 * sandbox.network: allowlist); an unknown or hostile name fails at load naming the field and
 * the known names; the egress admission allows a preset's host and nothing next to it.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { admission } from "../egress/run-egress.ts";
import { networkOf } from "../worker/drive-egress.ts";
import { NETWORK_PRESETS, PRESET_NAMES, presetHosts } from "./network-presets.ts";
import { parsePolicy } from "./policy-loader.ts";

const load = (lines: string[]) => parsePolicy(["version: 1", ...lines].join("\n"), "p.yaml");

it("every preset loads under sandbox.network: allowlist and adds its hosts to the allowlist", () => {
  const r = load([
    "sandbox: { network: allowlist }",
    `network: { presets: [${PRESET_NAMES.join(", ")}], allow: [example.org] }`,
  ]);
  assert.ok(r.ok, JSON.stringify(!r.ok && r.errors));
  const allow = networkOf(r.policy).allow;
  assert.equal(allow[0], "example.org");
  for (const name of PRESET_NAMES)
    for (const host of NETWORK_PRESETS[name]) assert.ok(allow.includes(host), host);
  assert.ok(allow.includes("registry.npmjs.org:443"));
  assert.ok(allow.includes("files.pythonhosted.org:443"));
  assert.ok(allow.includes("proxy.golang.org:443"));
  assert.ok(allow.includes("static.crates.io:443"));
  assert.ok(allow.includes("repo.maven.apache.org:443"));
});

it("the admission lets a preset's host through on 443 only, and not a look-alike", () => {
  const r = load(["sandbox: { network: allowlist }", "network: { presets: [npm] }"]);
  assert.ok(r.ok, JSON.stringify(!r.ok && r.errors));
  const n = networkOf(r.policy);
  const decide = (host: string, port: number) =>
    admission(n, host, port, { approved: new Set(), denied: new Set() }).decision;
  assert.equal(decide("registry.npmjs.org", 443), "allowed");
  assert.notEqual(decide("registry.npmjs.org", 80), "allowed");
  assert.notEqual(decide("registry.npmjs.org.evil.example", 443), "allowed");
  assert.notEqual(decide("pypi.org", 443), "allowed");
});

it("an unknown or hostile preset name fails naming the field and the known names", () => {
  for (const bad of ["npmjs", "NPM", "", "../npm", "npm,pypi", "__proto__", "constructor"]) {
    const r = load([
      "sandbox: { network: allowlist }",
      `network: { presets: [${JSON.stringify(bad)}] }`,
    ]);
    assert.ok(!r.ok, bad);
    const e = r.errors.find((x) => x.field === "network.presets.0");
    assert.ok(e, `${bad}: ${JSON.stringify(r.errors)}`);
    assert.match(e.message, /not a preset; known: npm, pypi, go, cargo, maven/);
  }
  const notList = load(["sandbox: { network: allowlist }", "network: { presets: npm }"]);
  assert.ok(!notList.ok);
  assert.ok(notList.errors.some((x) => x.field === "network.presets"));
  const many = load([
    "sandbox: { network: allowlist }",
    `network: { presets: [${Array(11).fill("npm").join(",")}] }`,
  ]);
  assert.ok(!many.ok);
});

it("presets without sandbox.network: allowlist are an error, not a silent no-op", () => {
  const r = load(["network: { presets: [pypi] }"]);
  assert.ok(!r.ok);
  const e = r.errors.find((x) => x.field === "network.presets");
  assert.match(e?.message ?? "", /needs sandbox\.network: allowlist/);
});

it("presetHosts keeps order and drops repeats", () => {
  assert.deepEqual(presetHosts(["go", "go"]), ["proxy.golang.org:443", "sum.golang.org:443"]);
  assert.deepEqual(presetHosts([]), []);
});
