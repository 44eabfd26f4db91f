/**
 * agentd (the real binary) against a Redis run as operators run it: an ACL user whose
 * password comes from AGENTD_REDIS_PASSWORD, TLS with the operator's CA. A wrong password
 * stops the start with one line naming the setting; the password is never printed.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startAgentd } from "../../internal/testing/agentd-process.ts";
import { startRedis, type TestRedis } from "../../internal/testing/redis-server.ts";

const PASSWORD = "Hunter2-login-9f3e";

describe("agentd server with a Redis ACL user over TLS", { timeout: 300_000 }, () => {
  let redis: TestRedis;
  before(async () => {
    redis = await startRedis({ user: { name: "agentd", password: PASSWORD }, tls: true });
  });
  after(() => redis?.stop());

  const flags = (): string[] => [
    "--event-log",
    redis.url,
    "--redis-tls-ca",
    redis.ca ?? "",
    "--insecure-no-auth",
  ];

  it("starts with the password from the environment and is ready; the password is never printed", async () => {
    const server = await startAgentd("server", flags(), {
      env: { AGENTD_REDIS_PASSWORD: PASSWORD, AGENTD_LOG_LEVEL: "debug" },
    });
    try {
      const res = await fetch(`${server.url}/readyz`);
      assert.equal(res.status, 200, await res.text());
      const clients = String(await redis.client().call("CLIENT", "LIST"));
      assert.match(clients, /user=agentd/, "agentd's connections are the ACL user's");
    } finally {
      await server.stop();
    }
    assert.doesNotMatch(server.output(), new RegExp(PASSWORD));
  });

  it("a wrong password stops the start: one line naming AGENTD_REDIS_PASSWORD, exit 1", async () => {
    let output = "";
    await assert.rejects(
      startAgentd("server", flags(), { env: { AGENTD_REDIS_PASSWORD: "wrong-Hunter2" } }),
      (err: Error) => {
        output = err.message;
        return true;
      },
    );
    assert.match(output, /Redis refused the login of user 'agentd' at 127\.0\.0\.1:\d+ \(TLS\)/);
    assert.match(output, /AGENTD_REDIS_PASSWORD/);
    assert.doesNotMatch(output, /wrong-Hunter2|Hunter2-login/);
    assert.doesNotMatch(output, /\n\s+at /, "no stack trace");
  });
});
