import assert from "node:assert/strict";
import { test } from "node:test";
import { createOpenAuthenticator, createTokenAuthenticator, parseAuthFile } from "./tokens.ts";

const TOKEN = `  - sha256: ${"a".repeat(64)}\n    tenant: acme\n    roles: [read]\n`;

test("tenants: policy, retention and limits parse; relative policy paths resolve against the file's directory", () => {
  const yaml = `tokens:\n${TOKEN}    rate: { perSecond: 5 }\ntenants:\n  acme:\n    policy: policies/acme.yaml\n    retention: 7d\n    limits:\n      concurrentRuns: 4\n      runsPerMinute: 30\n      tokensPerDay: 2000000\n      costPerDayUsd: 12.5\n      artifactBytes: 10GiB\n      uploadBytes: 1048576\n`;
  const file = parseAuthFile(yaml, "auth.yaml", "/etc/agentd");
  const acme = file.tenants.get("acme");
  assert.deepEqual(acme, {
    policy: "/etc/agentd/policies/acme.yaml",
    retentionMs: 7 * 86_400_000,
    limits: {
      concurrentRuns: 4,
      runsPerMinute: 30,
      tokensPerDay: 2_000_000,
      costPerDayUsd: 12.5,
      artifactBytes: 10 * 2 ** 30,
      uploadBytes: 1_048_576,
    },
  });
  const principal = file.tokens[0]?.principal;
  assert.deepEqual(principal?.rate, { perSecond: 5, burst: 5 });
  assert.match(principal?.tokenId ?? "", /^[0-9a-f]{12}$/);
  const auth = createTokenAuthenticator(file.tokens, file.tenants);
  assert.equal(auth.tenantConfig("acme").limits.concurrentRuns, 4);
  assert.deepEqual(auth.tenantConfig("other"), { limits: {} });
  assert.deepEqual(createOpenAuthenticator().tenantConfig("default"), { limits: {} });
});

test("tenants: a candidate (shadowPolicy) resolves like policy", () => {
  const yaml = `tokens:\n${TOKEN}tenants:\n  acme:\n    shadowPolicy: candidates/acme.yaml\n`;
  const file = parseAuthFile(yaml, "auth.yaml", "/etc/agentd");
  assert.deepEqual(file.tenants.get("acme"), {
    shadowPolicy: "/etc/agentd/candidates/acme.yaml",
    limits: {},
  });
});

test("hostile tenant entries are refused naming the field and line", () => {
  const cases: [string, RegExp][] = [
    ["  Acme!:\n    retention: 1d\n", /tenants\.Acme!/],
    [
      "  acme:\n    retention: 30\n",
      /a\.yaml:\d+: tenants\.acme\.retention: must be a number and a unit/,
    ],
    ["  acme:\n    retention: -1d\n", /tenants\.acme\.retention/],
    ["  acme:\n    retention: 0s\n", /tenants\.acme\.retention: must be more than 0/],
    ["  acme:\n    retention: 99999999999w\n", /tenants\.acme\.retention/],
    ["  acme:\n    limits: { concurrentRuns: 0 }\n", /tenants\.acme\.limits\.concurrentRuns/],
    ["  acme:\n    limits: { concurrentRuns: 1.5 }\n", /tenants\.acme\.limits\.concurrentRuns/],
    ["  acme:\n    limits: { runsPerMinute: '5' }\n", /tenants\.acme\.limits\.runsPerMinute/],
    ["  acme:\n    limits: { costPerDayUsd: -3 }\n", /tenants\.acme\.limits\.costPerDayUsd/],
    ["  acme:\n    limits: { artifactBytes: 10 gigs }\n", /tenants\.acme\.limits\.artifactBytes/],
    ["  acme:\n    limits: { artifactBytes: 0.5 }\n", /tenants\.acme\.limits\.artifactBytes/],
    ["  acme:\n    limits: { uploadBytes: 99999999TiB }\n", /tenants\.acme\.limits\.uploadBytes/],
    ["  acme:\n    limits: { tokensPerDy: 5 }\n", /tenants\.acme\.limits/],
    ["  acme:\n    polcy: x.yaml\n", /tenants\.acme/],
    ["  acme:\n    policy: ''\n", /tenants\.acme\.policy/],
    ["  acme:\n    shadowPolicy: ''\n", /tenants\.acme\.shadowPolicy/],
    ["  acme:\n    shadowPolicy: [a.yaml]\n", /tenants\.acme\.shadowPolicy/],
    [`  acme:\n    shadowPolicy: ${"x".repeat(5000)}\n`, /tenants\.acme\.shadowPolicy/],
    ["  acme:\n    shadowPolicies: a.yaml\n", /tenants\.acme/],
  ];
  for (const [tenants, re] of cases) {
    assert.throws(
      () => parseAuthFile(`tokens:\n${TOKEN}tenants:\n${tenants}`, "a.yaml"),
      re,
      tenants,
    );
  }
  assert.throws(
    () => parseAuthFile(`tokens:\n${TOKEN}    rate: { perSecond: 0 }\n`, "a.yaml"),
    /tokens\.0\.rate\.perSecond/,
  );
  assert.throws(
    () => parseAuthFile(`tokens:\n${TOKEN}    rate: { perSecond: 1, burst: 0 }\n`, "a.yaml"),
    /tokens\.0\.rate\.burst/,
  );
});
