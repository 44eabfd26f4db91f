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

// Credentials in other places than userinfo and the usual query names: presigned and SAS
// URLs, JWT and HMAC parameters, Azure Functions' code, tokens in the path (Slack, Discord).
const SECRET = "Zq8sEcReT0kEn4x7Wv2pLm9N";
const MORE = [
  `https://b.s3.amazonaws.com/k?X-Amz-Signature=${SECRET}&X-Amz-Credential=AKIAX&X-Amz-Security-Token=zz`,
  `https://b.s3.amazonaws.com/k?X-Amz-Credential=${SECRET}`,
  `https://b.s3.amazonaws.com/k?x-amz-security-token=${SECRET}`,
  `https://b.s3.amazonaws.com/k?AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Expires=1&Signature=${SECRET}`,
  `https://storage.googleapis.com/b/o?X-Goog-Signature=${SECRET}&X-Goog-Credential=sa`,
  `https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sp=w&sig=${SECRET}`,
  `https://h.example/in?jwt=${SECRET}`,
  `https://h.example/in?hmac=${SECRET}`,
  `https://h.example/in?signature=${SECRET}`,
  `https://h.example/in?key=${SECRET}`,
  `https://f.azurewebsites.net/api/hook?code=${SECRET}`,
  `https://h.example/in?t=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.${SECRET}`,
  `https://h.example/in#access_token=${SECRET}`,
  `https://b.s3.amazonaws.com/k?X%2DAmz%2DSignature=${SECRET}`,
  `https://hooks.slack.com/services/T00000000/B00000000/${SECRET}`,
  `https://discord.com/api/webhooks/123456789012345678/${SECRET}`,
  `https://discordapp.com/api/v10/webhooks/123456789012345678/${SECRET}`,
  `https://acme.webhook.office.com/webhookb2/a1b2@c3d4/IncomingWebhook/${SECRET}/e5f6`,
  `https://hooks.zapier.com/hooks/catch/123456/${SECRET}/`,
  `https://api.telegram.org/bot123456:${SECRET}/sendMessage`,
  `https://h.example/hook/eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.${SECRET}`,
];

it("presigned, SAS, JWT, HMAC, Azure Functions and path-token URLs are refused and masked, never echoed", () => {
  for (const url of MORE) {
    const p = urlCredentialProblem(url);
    assert.notEqual(p, undefined, `accepted; logged as ${redactUrlCredentials(url)}`);
    assert.ok(!p?.includes(SECRET), `the problem never echoes the value: ${p}`);
    assert.match(p ?? "", /headers|relay/, `the problem says where the credential goes: ${p}`);
    const line = redactUrlCredentials(`POST ${url} failed: ECONNREFUSED`);
    assert.ok(!line.includes(SECRET), `masked in logs: ${line}`);
    assert.match(line, /failed: ECONNREFUSED$/);
  }
});

it("the reviewer's forms: each refused, its value masked", () => {
  for (const [url, value] of [
    [
      "https://b.s3.amazonaws.com/k?X-Amz-Signature=abc&X-Amz-Credential=AKIAX&X-Amz-Security-Token=zz",
      "abc",
    ],
    ["https://h.example/in?jwt=eyJ.x.y", "eyJ.x.y"],
    ["https://h.example/in?hmac=deadbeef", "deadbeef"],
    ["https://hooks.slack.com/services/T00/B00/XXXXXXXXSECRET", "XXXXXXXXSECRET"],
  ] as const) {
    assert.notEqual(urlCredentialProblem(url), undefined, url);
    assert.ok(!redactUrlCredentials(url).includes(value), redactUrlCredentials(url));
  }
});

it("ordinary sink URLs stay accepted and unmasked", () => {
  for (const url of [
    "https://hooks.example.com/agentd",
    "http://collector:4318/v1/logs?format=json&tenant=acme",
    "http://otel-collector:4318/v1/logs",
    "http://approval-relay:8080/agentd",
    "https://h.example/x",
    "http://r/",
    "https://relay.example/hooks/550e8400-e29b-41d4-a716-446655440000?v=2&expires=10",
    "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&restype=container",
    "https://discord.com/developers/docs",
    "https://hooks.slack.com/",
    "https://h.example/in?keyword=a&monkey=b&codec=opus&passage=1&signed=true",
  ]) {
    assert.equal(urlCredentialProblem(url), undefined, url);
    assert.equal(redactUrlCredentials(`POST ${url} failed`), `POST ${url} failed`, url);
  }
});

it("the export config refuses a path-token URL naming the field, says where the secret goes, never echoes it", () => {
  const url = `https://hooks.slack.com/services/T00000000/B00000000/${SECRET}`;
  const r = parseExportConfig(
    `sinks:\n  - name: s\n    type: webhook\n    url: "${url}"\n    secret: $ENV.HOOK_KEY\n`,
    "export.yaml",
    ENV,
  );
  assert.ok(!r.ok);
  assert.deepEqual(
    r.errors.map((e) => e.field),
    ["sinks.0.url"],
  );
  assert.match(r.errors[0]?.message ?? "", /Slack webhook URL .*relay/);
  assert.ok(!JSON.stringify(r.errors).includes(SECRET));
  const code = parseExportConfig(
    `sinks:\n  - name: s\n    type: otlp-logs\n    endpoint: "https://f.azurewebsites.net/api/logs?code=${SECRET}"\n`,
    "export.yaml",
    ENV,
  );
  assert.ok(!code.ok);
  assert.match(code.errors[0]?.message ?? "", /headers as x-functions-key: \$ENV\.NAME/);
  assert.ok(!JSON.stringify(code.errors).includes(SECRET));
});

// Parameter names services use for a secret beyond the joined forms (`api_key`, `sig`…):
// any name holding a credential word, decoded and with `[]` stripped.
const WORD_PARAMS = [
  "secret_key",
  "app_secret",
  "webhook_secret",
  "bearer",
  "pw",
  "passphrase",
  "personal_access_token",
  "token[]",
  "apikey%5B%5D",
  "clientSecret",
  "user[password]",
  "X-Session-Id",
  "auth.credential",
];

it("a parameter named with a credential word, array forms included, is refused at load and masked", () => {
  for (const name of WORD_PARAMS) {
    const url = `https://hooks.example.com/agentd?${name}=${PASSWORD}`;
    const r = parseExportConfig(
      `sinks:\n  - name: s\n    type: webhook\n    url: "${url}"\n    secret: $ENV.HOOK_KEY\n`,
      "export.yaml",
      ENV,
    );
    assert.ok(!r.ok, `accepted: ${url}`);
    assert.deepEqual(
      r.errors.map((e) => e.field),
      ["sinks.0.url"],
      url,
    );
    assert.ok(!JSON.stringify(r.errors).includes(PASSWORD), `never echoed: ${url}`);
    const out = redactUrlCredentials(`POST ${url} failed`);
    assert.equal(out.includes(PASSWORD), false, out);
    assert.match(out, /failed$/);
  }
});

it("a `;name=value` path parameter is checked like a query parameter", () => {
  for (const url of [
    `https://hooks.example.com/agentd;token=${PASSWORD}`,
    `https://hooks.example.com/a;v=1;api_key=${PASSWORD}/b`,
    `https://hooks.example.com/agentd;x=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.${SECRET}`,
  ]) {
    const p = urlCredentialProblem(url);
    assert.match(p ?? "", /in its path/, url);
    assert.ok(!p?.includes(PASSWORD) && !p?.includes(SECRET), p);
    const out = redactUrlCredentials(`POST ${url} failed`);
    assert.ok(!out.includes(PASSWORD) && !out.includes(SECRET), out);
  }
  const plain = "https://hooks.example.com/a;v=1;format=json/b";
  assert.equal(urlCredentialProblem(plain), undefined);
  assert.equal(redactUrlCredentials(plain), plain);
});

it("a long hex path segment (a webhook secret) is masked in logs but not refused", () => {
  const hex = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
  for (const seg of [hex, hex.toUpperCase(), hex.slice(0, 32), `${hex};v=1`]) {
    const url = `https://relay.example.com/hook/${seg}`;
    assert.equal(urlCredentialProblem(url), undefined, url);
    const out = redactUrlCredentials(`POST ${url} failed: 500`);
    assert.ok(
      !out.includes(hex.slice(0, 32)) && !out.includes(hex.slice(0, 32).toUpperCase()),
      out,
    );
    assert.match(out, /^POST https:\/\/relay\.example\.com\/hook\/\*\*\* ?.* failed: 500$/);
  }
  // Shorter hex (a commit, an id) stays as it is.
  const short = "POST https://relay.example.com/hook/9f86d081884c7d659a2feaa0c55ad01 failed";
  assert.equal(redactUrlCredentials(short), short);
});

// userinfo in the forms the URL parser reads as `https://user:pass@host`: no slashes, one,
// backslashes, upper case, and userinfo holding quotes or angle brackets.
const USERINFO_FORMS = [
  "https:",
  "https:/",
  "https:\\\\",
  "https:\\",
  "HTTPS://",
  "wss:",
  "http:/\\",
].flatMap((prefix) =>
  ["user:", "", "u'x:", 'u"x:'].flatMap((user) =>
    ["", "pa'ss", 'pa"ss', "pa<ss>", "pa@ss"].map(
      (pre) => `${prefix}${user}${pre}${PASSWORD}@hooks.example.com/x`,
    ),
  ),
);

it("userinfo in every form the parser accepts is refused and masked alike", () => {
  for (const url of USERINFO_FORMS) {
    assert.notEqual(urlCredentialProblem(url), undefined, `the load check refuses ${url}`);
    const out = redactUrlCredentials(`fetch ${url} failed`);
    assert.equal(out.includes(PASSWORD), false, out);
    assert.match(out, /hooks\.example\.com\/x failed$/, out);
  }
});

it("the mask hides the credential of every URL the load check refuses in this file's corpus", () => {
  const corpus = [
    ...hostile,
    ...MORE,
    ...USERINFO_FORMS,
    ...WORD_PARAMS.map((n) => `https://hooks.example.com/agentd?${n}=${PASSWORD}`),
    ...WORD_PARAMS.map((n) => `https://hooks.example.com/agentd#${n}=${PASSWORD}`),
    ...WORD_PARAMS.map((n) => `https://hooks.example.com/agentd;${n}=${PASSWORD}`),
    `ftp://u:${PASSWORD}@c/`,
    `foo://u:p\\${PASSWORD}@c/`,
    `http://[::1]:${PASSWORD}@c/`,
  ];
  let refused = 0;
  for (const url of corpus) {
    if (urlCredentialProblem(url) === undefined) continue;
    refused++;
    for (const line of [url, `POST ${url} failed`, JSON.stringify({ url }), `<${url}>`]) {
      const out = redactUrlCredentials(line);
      assert.ok(!out.includes(PASSWORD) && !out.includes(SECRET), `left in clear: ${out}`);
    }
  }
  assert.ok(
    refused >= corpus.length - 3,
    `the check refuses the corpus (${refused}/${corpus.length})`,
  );
});
