import assert from "node:assert/strict";
import { it } from "node:test";
import { isAgentdError } from "../errors.ts";
import { createTokenAuthenticator, hashToken, parseAuthConfig } from "./tokens.ts";

const yaml = `tokens:
  - sha256: ${hashToken("acme-secret")}
    tenant: acme
    roles: [submit, read]
    name: ci
  - sha256: ${hashToken("globex-secret").toUpperCase()}
    tenant: globex
    roles: [admin]
`;

it("authenticates hashed tokens to their tenant and roles", () => {
  const auth = createTokenAuthenticator(parseAuthConfig(yaml, "auth.yaml"));
  const p = auth.authenticate("Bearer acme-secret");
  assert.equal(p.tenantId, "acme");
  assert.equal(p.name, "ci");
  assert.deepEqual([...p.roles], ["submit", "read"]);
  assert.equal(auth.authenticate("bearer   globex-secret").tenantId, "globex");
});

it("refuses missing, malformed and wrong tokens with EUNAUTHENTICATED", () => {
  const auth = createTokenAuthenticator(parseAuthConfig(yaml, "auth.yaml"));
  for (const h of [undefined, "", "Basic abc", "Bearer", "Bearer acme-secretx", "Bearer a b"]) {
    assert.throws(
      () => auth.authenticate(h),
      (e) => isAgentdError(e, "EUNAUTHENTICATED"),
      String(h),
    );
  }
});

it("auth file errors name the file, line and field", () => {
  assert.throws(
    () =>
      parseAuthConfig("tokens:\n  - sha256: abc\n    tenant: acme\n    roles: [read]\n", "a.yaml"),
    /^AgentdError: a\.yaml:2: tokens\.0\.sha256: must be 64 hex/,
  );
  assert.throws(
    () =>
      parseAuthConfig(
        `tokens:\n  - sha256: ${"a".repeat(64)}\n    tenant: acme\n    roles: [root]\n`,
        "b.yaml",
      ),
    /b\.yaml:4: tokens\.0\.roles\.0/,
  );
  assert.throws(
    () =>
      parseAuthConfig(
        `tokens:\n  - sha256: ${"a".repeat(64)}\n    tenant: acme\n    roles: [read]\n    extra: 1\n`,
        "c.yaml",
      ),
    /c\.yaml:\d+: tokens\.0/,
  );
  assert.throws(() => parseAuthConfig("tokens: [unclosed\n", "d.yaml"), /d\.yaml:\d+:/);
  assert.throws(() => parseAuthConfig("tokens: []\n", "e.yaml"), /at least one token/);
});
