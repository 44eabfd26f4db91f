import assert from "node:assert/strict";
import { it } from "node:test";
import { parseExportConfig } from "./config.ts";
import { redactUrlCredentials, urlCredentialProblem } from "./url-credentials.ts";

const ENV = { HOOK_KEY: "0123456789abcdef-key" };
const PASSWORD = "hunter2-PASSWORD-9f8e";

const hostile = [
  `https://user:${PASSWORD}@hooks.example.com/agentd`,
  `https://${PASSWORD}@hooks.example.com/agentd`,
  `https://user:${PASSWORD}@@hooks.example.com/agentd`,
  `http://:${PASSWORD}@collector:4318/v1/logs`,
  `https://hooks.example.com/agentd?token=${PASSWORD}`,
  `https://hooks.example.com/agentd?x=1&API_KEY=${PASSWORD}`,
  `https://hooks.example.com/agentd?access-token=${PASSWORD}`,
  `https://hooks.example.com/agentd?sig=${PASSWORD}`,
  `https://hooks.example.com/agentd?Password=${PASSWORD}`,
];

it("a URL with userinfo or a credential-like query parameter is a problem; plain ones are not", () => {
  for (const url of hostile) {
    const p = urlCredentialProblem(url);
    assert.ok(p !== undefined, url);
    assert.ok(!p.includes(PASSWORD), `the problem never echoes the value: ${p}`);
  }
  for (const url of [
    "https://hooks.example.com/agentd",
    "http://collector:4318/v1/logs?format=json&tenant=acme",
  ])
    assert.equal(urlCredentialProblem(url), undefined, url);
});

it("the export config refuses each such URL at load, naming the field, never echoing it", () => {
  for (const url of hostile) {
    for (const [type, field, extra] of [
      ["webhook", "url", "    secret: $ENV.HOOK_KEY\n"],
      ["otlp-logs", "endpoint", ""],
    ] as const) {
      const text = `sinks:\n  - name: s\n    type: ${type}\n    ${field}: "${url}"\n${extra}`;
      const r = parseExportConfig(text, "export.yaml", ENV);
      assert.ok(!r.ok, `${type} ${url} is refused`);
      assert.deepEqual(
        r.errors.map((e) => [e.field, e.line]),
        [[`sinks.0.${field}`, 4]],
        url,
      );
      assert.ok(!JSON.stringify(r.errors).includes(PASSWORD), `never echoed: ${url}`);
    }
  }
  // An otherwise-bad URL carrying a password is not echoed either.
  const bad = parseExportConfig(
    `sinks:\n  - name: s\n    type: otlp-logs\n    endpoint: "ftp://u:${PASSWORD}@c/"\n`,
    "export.yaml",
    ENV,
  );
  assert.ok(!bad.ok && bad.errors[0]?.field === "sinks.0.endpoint");
  assert.ok(!JSON.stringify(bad.errors).includes(PASSWORD));
});

it("redaction masks userinfo and credential query values in any text, e.g. fetch's own error", async () => {
  const err = await fetch(`http://user:${PASSWORD}@127.0.0.1:9/x`).catch((e: Error) => e);
  assert.ok(err instanceof Error && err.message.includes(PASSWORD), "fetch names the URL");
  const masked = redactUrlCredentials(err.message);
  assert.ok(!masked.includes(PASSWORD), masked);
  assert.match(masked, /http:\/\/\*\*\*@127\.0\.0\.1:9\/x/);
  for (const url of hostile) {
    const line = `POST ${url} failed: ECONNREFUSED`;
    const out = redactUrlCredentials(line);
    assert.ok(!out.includes(PASSWORD), out);
    assert.match(out, /failed: ECONNREFUSED$/);
  }
  const plain = "POST https://hooks.example.com/a?tenant=acme failed";
  assert.equal(redactUrlCredentials(plain), plain);
});
