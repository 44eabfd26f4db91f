/** The policy's `network` section: good entries load; each bad one fails at its line and field. */
import assert from "node:assert/strict";
import { it } from "node:test";
import { parsePolicy } from "./policy-loader.ts";

const policy = (network: string) => `version: 1\nnetwork:\n${network}`;

it("allow, private, approval and credentials load with their defaults", () => {
  const r = parsePolicy(
    policy(
      [
        "  allow: [registry.npmjs.org, '*.pythonhosted.org:443', api.github.com]",
        "  private: [10.20.0.0/16, 'fd00:1::/64', 192.168.1.5]",
        "  approval: risk",
        "  credentials:",
        "    - host: api.github.com",
        "      header: Authorization",
        "      value: Bearer $ENV.GITHUB_TOKEN",
      ].join("\n"),
    ),
    "p.yaml",
  );
  assert.ok(r.ok, JSON.stringify(!r.ok && r.errors));
  assert.equal(r.policy.network.approval, "risk");
  assert.equal(r.policy.network.credentials[0]?.header, "Authorization");
  const none = parsePolicy("version: 1\n", "p.yaml");
  assert.ok(none.ok);
  assert.deepEqual(none.policy.network, {
    allow: [],
    presets: [],
    private: [],
    approval: "never",
    credentials: [],
    trust: [],
    limits: { concurrent: 64, connections: 2000, connectionBytes: 1024 ** 3, bytes: 4 * 1024 ** 3 },
  });
  const limited = parsePolicy(policy("  limits: { connections: 10, bytes: 1MiB }"), "p.yaml");
  assert.ok(limited.ok, JSON.stringify(!limited.ok && limited.errors));
  assert.equal(limited.policy.network.limits.bytes, 1024 ** 2);
  assert.equal(limited.policy.network.limits.concurrent, 64);
  const bad = parsePolicy(policy("  limits: { connections: 0, bytes: 12 }"), "p.yaml");
  assert.ok(!bad.ok);
  const text = bad.errors.map((e) => `${e.field} ${e.message}`).join("\n");
  assert.match(text, /network\.limits\.connections/);
  assert.match(text, /network\.limits\.bytes .*at least 1KiB/);
});

it("every bad entry at its line and field, with the reason", () => {
  const r = parsePolicy(
    policy(
      [
        "  allow:", // 3
        "    - '*.com'", // 4
        "    - 10.0.0.1", // 5
        "    - good.example.com", // 6
        "  private:", // 7
        "    - 10.0.0.0/33", // 8
        "    - 0.0.0.0/0", // 9
        "    - not-an-ip", // 10
        "  approval: sometimes", // 11
        "  credentials:", // 12
        "    - host: evil.example.org", // 13
        "      header: Authorization", // 14
        "      value: Bearer ghp_literal", // 15
        "    - host: '*.example.com'", // 16
        "      header: 'X Bad'", // 17
        "      value: $ENV.T", // 18
      ].join("\n"),
    ),
    "p.yaml",
  );
  assert.ok(!r.ok);
  const at = (field: string) => r.errors.find((e) => e.field === field);
  assert.match(at("network.allow.0")?.message ?? "", /too broad/);
  assert.equal(at("network.allow.0")?.line, 4);
  assert.match(at("network.allow.1")?.message ?? "", /IP address/);
  assert.equal(at("network.private.0")?.line, 8);
  assert.match(at("network.private.1")?.message ?? "", /too wide/);
  assert.match(at("network.private.2")?.message ?? "", /not an IP address or subnet/);
  assert.equal(at("network.approval")?.line, 11);
  assert.match(at("network.credentials.0.value")?.message ?? "", /\$ENV\.NAME/);
  assert.match(at("network.credentials.1.header")?.message ?? "", /header name/);
});

it("credentials only for an allowed, exact host", () => {
  const r = parsePolicy(
    policy(
      [
        "  allow: ['*.example.com']",
        "  credentials:",
        "    - {host: other.example.org, header: Authorization, value: 'Bearer $ENV.T'}",
        "    - {host: '*.example.com', header: Authorization, value: 'Bearer $ENV.T'}",
        "    - {host: api.example.com, header: Authorization, value: 'Bearer $ENV.T'}",
      ].join("\n"),
    ),
    "p.yaml",
  );
  assert.ok(!r.ok);
  const fields = r.errors.map((e) => `${e.field}: ${e.message}`);
  assert.ok(
    fields.some((f) =>
      /credentials\.0\.host: other\.example\.org is not in network\.allow/.test(f),
    ),
    fields.join("\n"),
  );
  assert.ok(
    fields.some((f) => /credentials\.1\.host: .*not a wildcard/.test(f)),
    fields.join("\n"),
  );
  assert.ok(!fields.some((f) => f.startsWith("network.credentials.2")), "api.example.com is fine");
});
