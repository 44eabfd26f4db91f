/**
 * Attack (#27 point 6: "export URLs with credentials refused at load (naming the field,
 * never echoing the value)"; url-credentials.ts also masks every refused form in logged
 * text): sink URLs that carry a credential in a form the checks miss, so the config loads
 * and, when deliveries fail, the URL is logged and stored as it is.
 *
 * - A fully qualified host with its trailing dot (`https://hooks.slack.com./services/…`,
 *   `discord.com.`, `api.telegram.org.`): the same service, the same secret in the path.
 *   url-credential-forms.ts pathCredentialProblem()/maskPath() compare the host with
 *   `hooks.slack.com` exactly.
 * - Token-shaped values of vendors the value check does not know, in the path or as a bare
 *   query value: Anthropic `sk-ant-api03-…`, OpenAI `sk-proj-…`, GitLab `glpat-…`, npm
 *   `npm_…`, SendGrid `SG.….…` (isTokenValue knows JWT, AWS key ids, GitHub and Slack).
 * - A parameter named `secretkey` (one word: CREDENTIAL_PARAM has no `secret` prefix and
 *   nameWords() does not split it).
 *
 * What must hold: parseExportConfig refuses each URL naming sinks.0.url without echoing the
 * value, and redactUrlCredentials() leaves none of the secrets in a logged line.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseExportConfig } from "./config.ts";
import { redactUrlCredentials } from "./url-credentials.ts";

const CASES: [string, string][] = [
  [
    "https://hooks.slack.com./services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "XXXXXXXXXXXXXXXXXXXXXXXX",
  ],
  [
    "https://discord.com./api/webhooks/123456789012345678/SeCrEtDiScOrDtOkEnVaLuE0123456789",
    "SeCrEtDiScOrDtOkEnVaLuE0123456789",
  ],
  [
    "https://api.telegram.org./bot123456:AAHsecretTelegramTokenValue0123456/sendMessage",
    "AAHsecretTelegramTokenValue0123456",
  ],
  [
    "https://h.example/hook/sk-ant-api03-Abcdefghijklmnopqrstuvwxyz0123456789ABCDEF",
    "Abcdefghijklmnopqrstuvwxyz0123456789ABCDEF",
  ],
  [
    "https://h.example/hook?sk-proj-Abcdefghijklmnopqrstuvwxyz0123456789",
    "Abcdefghijklmnopqrstuvwxyz0123456789",
  ],
  ["https://h.example/hook/glpat-AbcdefGhijklmnopQRST", "AbcdefGhijklmnopQRST"],
  [
    "https://h.example/in/npm_Abcdefghijklmnopqrstuvwxyz0123456789",
    "Abcdefghijklmnopqrstuvwxyz0123456789",
  ],
  ["https://h.example/hook?secretkey=s3cr3tValueNotSeen", "s3cr3tValueNotSeen"],
];

const config = (url: string) =>
  `sinks:\n  - name: a\n    type: webhook\n    url: "${url}"\n    secret: $ENV.K\n`;

describe("sink URLs whose credential the load check misses", () => {
  for (const [url, secret] of CASES)
    it(url.slice(0, 60), () => {
      const r = parseExportConfig(config(url), "export.yaml", { K: "k".repeat(32) });
      assert.equal(r.ok, false, `the config loaded with ${url}`);
      if (!r.ok) {
        assert.ok(
          r.errors.some((e) => e.field === "sinks.0.url"),
          JSON.stringify(r.errors),
        );
        assert.ok(!JSON.stringify(r.errors).includes(secret), "the refusal echoes the value");
      }
      const logged = redactUrlCredentials(`delivery to ${url} failed: 503`);
      assert.ok(!logged.includes(secret), `a logged line keeps the secret: ${logged}`);
    });
});
