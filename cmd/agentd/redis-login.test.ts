/**
 * agentd (the real binary) against a Redis run as operators run it: an ACL user whose
 * password comes from AGENTD_REDIS_PASSWORD, TLS with the operator's CA. A wrong password
 * stops the start with one line naming the setting; the password is never printed. And
 * through real Sentinel: the primary killed, CreateRun goes on against the promoted replica.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startAgentd } from "../../internal/testing/agentd-process.ts";
import { startSentinels, type TestSentinels } from "../../internal/testing/redis-sentinel.ts";
import { startRedis, type TestRedis } from "../../internal/testing/redis-server.ts";
import { until } from "../../internal/testing/until.ts";

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

describe("agentd server through Redis Sentinel, the primary killed", { timeout: 600_000 }, () => {
  let primary: TestRedis;
  const replicas: TestRedis[] = [];
  let sentinels: TestSentinels;
  before(async () => {
    const user = { name: "agentd", password: PASSWORD };
    primary = await startRedis({ user });
    for (let i = 0; i < 2; i++) replicas.push(await startRedis({ user, replicaOf: primary.port }));
    sentinels = await startSentinels({ primaryPort: primary.port, user });
    await sentinels.waitForReplicas(2);
  });
  after(async () => {
    await sentinels?.stop();
    for (const r of replicas) await r.stop();
    await primary?.stop();
  });

  it("CreateRun goes on against the promoted replica; runs acknowledged before the kill are there", async () => {
    const server = await startAgentd(
      "server",
      ["--event-log", sentinels.url, "--insecure-no-auth"],
      {
        env: { AGENTD_REDIS_PASSWORD: PASSWORD, AGENTD_REDIS_MIN_REPLICAS_ACKED: "1" },
      },
    );
    const call = async (method: string, body: object): Promise<Response> =>
      fetch(`${server.url}/agentd.v1.RunService/${method}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const create = async (): Promise<string> => {
      const res = await call("CreateRun", { prompt: "through sentinel" });
      assert.equal(res.status, 200, await res.clone().text());
      return ((await res.json()) as { run: { runId: string } }).run.runId;
    };
    try {
      const before = [await create(), await create()];
      const oldPort = primary.port;
      await primary.kill();
      // Bounded waits that say what they wait for: Sentinel's promotion, then a CreateRun
      // acknowledged by the new primary and its replica.
      await until(
        "Sentinel promotes a replica",
        async () => (await sentinels.primaryPort().catch(() => oldPort)) !== oldPort,
        { capMs: 180_000 },
      );
      const afterKill = await until(
        "a CreateRun acknowledged after the failover",
        () => create().catch(() => undefined),
        { capMs: 180_000 },
      );
      for (const runId of [...before, afterKill]) {
        const res = await call("GetRun", { runId });
        assert.equal(res.status, 200, `run ${runId}: ${await res.text()}`);
      }
    } finally {
      await server.stop();
    }
    assert.doesNotMatch(server.output(), new RegExp(PASSWORD));
  });
});
