/**
 * ATTACK (review of issue #27, export URL credentials): credential forms a sink URL still
 * carries past the load-time check, and forms the check refuses that the log masking
 * (redactUrlCredentials, "every form refused is also masked") leaves in clear.
 *
 * Must never: echo a real credential (the values here are made up).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseExportConfig } from "./config.ts";
import { redactUrlCredentials, urlCredentialProblem } from "./url-credentials.ts";

const PASSWORD = "hunter2-PASSWORD-9f8e";
const ENV = { HOOK_KEY: "0123456789abcdef-key" };

// Parameter names real services use for a secret that CREDENTIAL_PARAM does not match.
const acceptedParams = [
  "secret_key",
  "app_secret",
  "webhook_secret",
  "bearer",
  "pw",
  "passphrase",
  "personal_access_token",
  "token[]",
  "apikey%5B%5D",
];

describe("attack: sink URL credentials the load-time check accepts", () => {
  for (const name of acceptedParams)
    it(`a webhook URL with ?${name}=… is refused at load`, () => {
      const url = `https://hooks.example.com/agentd?${name}=${PASSWORD}`;
      const text = `sinks:\n  - name: s\n    type: webhook\n    url: "${url}"\n    secret: $ENV.HOOK_KEY\n`;
      const r = parseExportConfig(text, "export.yaml", ENV);
      assert.equal(r.ok, false, `accepted: ${url}`);
    });

  for (const name of acceptedParams)
    it(`?${name}=… is masked in logged text`, () => {
      const out = redactUrlCredentials(
        `POST https://hooks.example.com/agentd?${name}=${PASSWORD} failed`,
      );
      assert.equal(out.includes(PASSWORD), false, out);
    });

  it("a matrix parameter (;token=…) in the path is refused at load", () => {
    assert.notEqual(
      urlCredentialProblem(`https://hooks.example.com/agentd;token=${PASSWORD}`),
      undefined,
    );
  });

  it("a lowercase hex secret in a webhook path is masked in logged text", () => {
    const hex = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    const out = redactUrlCredentials(`POST https://relay.example.com/hook/${hex} failed: 500`);
    assert.equal(out.includes(hex), false, out);
  });
});

describe("attack: userinfo forms refused at load but left in clear by the log masking", () => {
  for (const url of [
    `https:user:${PASSWORD}@hooks.example.com/x`,
    `https:/user:${PASSWORD}@hooks.example.com/x`,
    `https:\\\\user:${PASSWORD}@hooks.example.com/x`,
    `https://user:pa'ss${PASSWORD}@hooks.example.com/x`,
    `https://user:pa"ss${PASSWORD}@hooks.example.com/x`,
  ])
    it(`${JSON.stringify(url)} is refused and masked alike`, () => {
      assert.notEqual(urlCredentialProblem(url), undefined, "the load check refuses it");
      const out = redactUrlCredentials(`fetch ${url} failed`);
      assert.equal(out.includes(PASSWORD), false, out);
    });
});
