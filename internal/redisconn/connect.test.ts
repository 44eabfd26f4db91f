import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { isAgentdError } from "../errors.ts";
import { delta } from "../eventlog/conformance.ts";
import { RedisEventLog } from "../eventlog/redis-event-log.ts";
import { startRedis, type TestRedis } from "../testing/redis-server.ts";
import { connectRedis, createRedisClient } from "./connect.ts";
import { parseRedisUrl } from "./redis-url.ts";

const PASSWORD = "s3cret-Hunter2-acl";

async function refusedWith(
  url: string,
  password: string | undefined,
  code: string,
): Promise<string> {
  const target = parseRedisUrl(url, { password });
  const client = createRedisClient(target);
  client.on("error", () => undefined);
  try {
    await connectRedis(client, target);
  } catch (err) {
    assert.ok(isAgentdError(err), String(err));
    assert.equal(err.code, code, err.message);
    assert.doesNotMatch(err.message, new RegExp(PASSWORD), "the password is never in an error");
    return err.message;
  }
  client.disconnect();
  assert.fail(`connecting to ${url} should have failed`);
}

describe("the Redis connection factory against real servers", () => {
  let acl: TestRedis;
  let tls: TestRedis;
  before(async () => {
    acl = await startRedis({ user: { name: "agentd", password: PASSWORD } });
    tls = await startRedis({ user: { name: "agentd", password: PASSWORD }, tls: true });
  });
  after(async () => {
    await acl?.stop();
    await tls?.stop();
  });

  it("an ACL user with AGENTD_REDIS_PASSWORD appends; its duplicates (other connections) log in too", async () => {
    const target = parseRedisUrl(acl.url, { password: PASSWORD });
    const client = createRedisClient(target, { enableAutoPipelining: true });
    await connectRedis(client, target);
    const log = new RedisEventLog({ client, prefix: "acl:" });
    try {
      const ev = await log.append({ ...delta("r1", "hello"), tenantId: "t" });
      assert.equal(ev.seq, 1);
      // The log's own blocking connection is a duplicate: it reads what was appended.
      const read = await log.read("r1", 0);
      assert.equal(read.length, 1);
      assert.equal(await client.call("ACL", "WHOAMI"), "agentd");
      const dup = client.duplicate();
      assert.equal(await dup.call("ACL", "WHOAMI"), "agentd");
      dup.disconnect();
    } finally {
      await log.close();
      client.disconnect();
    }
  });

  it("a wrong or missing password is refused with an error naming the user and AGENTD_REDIS_PASSWORD", async () => {
    const wrong = await refusedWith(acl.url, "not-the-password", "EUNAUTHENTICATED");
    assert.match(wrong, /Redis refused the login of user 'agentd' at 127\.0\.0\.1:\d+/);
    assert.match(wrong, /AGENTD_REDIS_PASSWORD/);
    const none = await refusedWith(`redis://127.0.0.1:${acl.port}`, undefined, "EUNAUTHENTICATED");
    assert.match(none, /NOAUTH|WRONGPASS|Authentication required/i);
    // A password given in the URL itself is masked just the same.
    await refusedWith(
      `redis://agentd:${PASSWORD}x@127.0.0.1:${acl.port}`,
      undefined,
      "EUNAUTHENTICATED",
    );
  });

  it("rediss:// with the CA of the server's certificate connects; without it the certificate is refused", async () => {
    const target = parseRedisUrl(tls.url, { password: PASSWORD });
    const client = createRedisClient(target, { tlsCaFile: tls.ca });
    await connectRedis(client, target);
    assert.equal(await client.set("k", "v"), "OK");
    const dup = client.duplicate();
    assert.equal(await dup.get("k"), "v");
    dup.disconnect();
    client.disconnect();
    const untrusted = await refusedWith(tls.url, PASSWORD, "EUNAVAILABLE");
    assert.match(
      untrusted,
      /cannot reach Redis at user 'agentd' at 127\.0\.0\.1:\d+ \(TLS\): .*certificate/i,
    );
    // Plain redis:// to the TLS-only port does not get through either.
    await refusedWith(tls.url.replace("rediss:", "redis:"), PASSWORD, "EUNAVAILABLE");
  });

  it("an unreadable --redis-tls-ca names the flag", () => {
    assert.throws(
      () => createRedisClient(parseRedisUrl(tls.url), { tlsCaFile: "/nonexistent/ca.pem" }),
      /--redis-tls-ca \/nonexistent\/ca\.pem: cannot read it/,
    );
  });
});

describe("the connection factory against sentinels that never answer", () => {
  it("gives up after its timeout with EUNAVAILABLE naming the sentinels, never hanging", async () => {
    const target = parseRedisUrl("redis+sentinel://agentd@127.0.0.1:1,127.0.0.1:2/main", {
      password: PASSWORD,
    });
    const client = createRedisClient(target);
    client.on("error", () => undefined);
    await assert.rejects(connectRedis(client, target, 1000), (err: unknown) => {
      assert.ok(isAgentdError(err, "EUNAVAILABLE"), String(err));
      assert.match(
        err.message,
        /cannot reach Redis at user 'agentd' at the primary 'main' of the sentinels 127\.0\.0\.1:1,127\.0\.0\.1:2: no answer within 1000 ms/,
      );
      assert.doesNotMatch(err.message, new RegExp(PASSWORD));
      return true;
    });
  });
});
