import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { loadExportConfig, parseExportConfig } from "./config.ts";

const dir = mkdtempSync(join(tmpdir(), "agentd-export-config-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const ENV = { HOOK_KEY: "0123456789abcdef-key" };

it("a good config: defaults filled, the key read from the environment", () => {
  const r = parseExportConfig(
    [
      "sinks:",
      "  - name: slack-approvals",
      "    type: webhook",
      "    url: https://hooks.example.com/agentd",
      "    secret: $ENV.HOOK_KEY",
      '    types: ["approval.requested"]',
      "  - name: otel",
      "    type: otlp-logs",
      "    endpoint: http://collector:4318/v1/logs",
      "    tenants: [acme]",
      "    start: oldest",
    ].join("\n"),
    "export.yaml",
    ENV,
  );
  assert.ok(r.ok, JSON.stringify(r));
  assert.equal(r.leaseTtlMs, 10_000);
  const [hook, otel] = r.sinks;
  assert.equal(hook?.type, "webhook");
  assert.equal(hook?.type === "webhook" && hook.key.toString(), ENV.HOOK_KEY);
  assert.deepEqual([hook?.maxAttempts, hook?.timeoutMs, hook?.start], [20, 10_000, "now"]);
  assert.deepEqual([otel?.type, otel?.tenants, otel?.start], ["otlp-logs", ["acme"], "oldest"]);
});

it("every problem at once, each with its line and field; a pasted secret is never echoed", () => {
  const text = [
    "sinks:", // 1
    "  - name: Bad_Name", // 2
    "    type: webhook", // 3
    "    url: file:///etc/passwd", // 4
    "    secret: sk-live-PASTED-KEY-1234567890", // 5
    "    maxAttempts: 0", // 6
    "  - name: dup", // 7
    "    type: otlp-logs", // 8
    "    endpoint: http://c/v1/logs", // 9
    "    types: [Not A Type]", // 10
    "  - name: dup", // 11
    "    type: otlp-logs", // 12
    "    endpoint: http://c/v1/logs", // 13
    "    backoff: {initialMs: 1000, maxMs: 10}", // 14
    "    colour: red", // 15
    "  - name: nope", // 16
    "    type: kafka", // 17
  ].join("\n");
  const r = parseExportConfig(text, "x.yaml", ENV);
  assert.ok(!r.ok);
  const at = (field: string) => r.errors.find((e) => e.field === field);
  assert.equal(at("sinks.0.name")?.line, 2);
  assert.equal(at("sinks.0.url")?.line, 4);
  assert.equal(at("sinks.0.secret")?.line, 5);
  assert.equal(at("sinks.0.maxAttempts")?.line, 6);
  assert.equal(at("sinks.1.types.0")?.line, 10);
  assert.equal(at("sinks.2.colour")?.line, 15);
  assert.equal(at("sinks.3.type")?.line, 17);
  assert.ok(!JSON.stringify(r.errors).includes("PASTED-KEY"), "the secret is not echoed");
  // The semantic checks run once the shape is right.
  const dup = parseExportConfig(
    [
      "sinks:",
      "  - {name: dup, type: otlp-logs, endpoint: 'http://c/v1/logs'}",
      "  - {name: dup, type: otlp-logs, endpoint: 'http://c/v1/logs', backoff: {initialMs: 1000, maxMs: 10}}",
    ].join("\n"),
    "y.yaml",
    ENV,
  );
  assert.ok(!dup.ok);
  assert.deepEqual(
    dup.errors.map((e) => [e.field, e.line]),
    [
      ["sinks.1.name", 3],
      ["sinks.1.backoff.maxMs", 3],
    ],
  );
});

it("the signing key: $ENV set and long enough, or a readable secretFile; exactly one", () => {
  const hook = (extra: string) =>
    parseExportConfig(
      `sinks:\n  - name: h\n    type: webhook\n    url: http://r/\n${extra}`,
      "h.yaml",
      {
        SHORT: "short",
        ...ENV,
      },
    );
  const unset = hook("    secret: $ENV.NOT_SET_ANYWHERE\n");
  assert.ok(!unset.ok && /NOT_SET_ANYWHERE is not set/.test(unset.errors[0]?.message ?? ""));
  const short = hook("    secret: $ENV.SHORT\n");
  assert.ok(!short.ok && /at least 16 bytes/.test(short.errors[0]?.message ?? ""));
  const none = hook("");
  assert.ok(!none.ok && /one of them/.test(none.errors[0]?.message ?? ""));
  const both = hook(`    secret: $ENV.HOOK_KEY\n    secretFile: /x\n`);
  assert.ok(!both.ok && both.errors[0]?.field === "sinks.0.secretFile");
  const missing = hook("    secretFile: /nonexistent/key\n");
  assert.ok(!missing.ok && /ENOENT/.test(missing.errors[0]?.message ?? ""));
  const keyFile = join(dir, "key");
  writeFileSync(keyFile, "a-key-from-a-mounted-secret\n");
  const fromFile = hook(`    secretFile: ${keyFile}\n`);
  assert.ok(fromFile.ok && fromFile.sinks[0]?.type === "webhook");
  assert.equal(
    fromFile.ok && fromFile.sinks[0]?.type === "webhook" && fromFile.sinks[0].key.toString(),
    "a-key-from-a-mounted-secret",
  );
});

it("loadExportConfig: a missing file and a YAML error name the file", () => {
  assert.throws(
    () => loadExportConfig(join(dir, "none.yaml"), ENV),
    /cannot read the export config .*none\.yaml: ENOENT/,
  );
  const broken = join(dir, "broken.yaml");
  writeFileSync(broken, "sinks: [\n");
  assert.throws(() => loadExportConfig(broken, ENV), /broken\.yaml:\d+:\d+: \(yaml\)/);
});

it("header values from $ENV (never echoed when wrong); an unset one is an error at its line", () => {
  const text = (v: string) =>
    `sinks:\n  - name: c\n    type: otlp-logs\n    endpoint: http://c/v1/logs\n    headers:\n      Authorization: ${v}\n`;
  const ok = parseExportConfig(text("$ENV.OTLP_AUTH"), "h.yaml", { OTLP_AUTH: "Basic c2VjcmV0" });
  assert.ok(ok.ok);
  assert.equal(ok.sinks[0]?.headers.Authorization, "Basic c2VjcmV0");
  const unset = parseExportConfig(text("$ENV.OTLP_AUTH"), "h.yaml", {});
  assert.ok(!unset.ok);
  assert.deepEqual(
    [unset.errors[0]?.field, unset.errors[0]?.line],
    ["sinks.0.headers.Authorization", 6],
  );
  const long = parseExportConfig(text(`Bearer ${"S".repeat(5000)}`), "h.yaml", {});
  assert.ok(!long.ok);
  assert.ok(!JSON.stringify(long.errors).includes("SSSS"), "a header value is never echoed");
});
