import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isAgentdError } from "../errors.ts";
import { maskRedisUrl, maskSecret, parseRedisUrl } from "./redis-url.ts";

function refused(url: string, pattern: RegExp): void {
  assert.throws(
    () => parseRedisUrl(url),
    (err: unknown) => {
      assert.ok(isAgentdError(err, "EVALIDATION"), String(err));
      assert.equal(err.field, "event_log");
      assert.match(err.message, /^--event-log /);
      assert.match(err.message, pattern);
      assert.doesNotMatch(err.message, /hunter2/, "the password is never in an error");
      return true;
    },
  );
}

describe("parseRedisUrl", () => {
  it("reads the four forms: user, password, db, TLS, sentinels and their master", () => {
    assert.deepEqual(parseRedisUrl("redis://127.0.0.1:6380/2"), {
      kind: "standalone",
      nodes: [{ host: "127.0.0.1", port: 6380 }],
      db: 2,
      tls: false,
    });
    const acl = parseRedisUrl("rediss://agentd:p%40ss@redis.internal");
    assert.equal(acl.tls, true);
    assert.equal(acl.username, "agentd");
    assert.equal(acl.password, "p@ss");
    assert.deepEqual(acl.nodes, [{ host: "redis.internal", port: 6379 }]);
    const s = parseRedisUrl("redis+sentinel://agentd@s1,s2:26380,[::1]:26381/main/3");
    assert.equal(s.kind, "sentinel");
    assert.equal(s.masterName, "main");
    assert.equal(s.db, 3);
    assert.equal(s.username, "agentd");
    assert.deepEqual(s.nodes, [
      { host: "s1", port: 26379 },
      { host: "s2", port: 26380 },
      { host: "::1", port: 26381 },
    ]);
    assert.equal(parseRedisUrl("rediss+sentinel://s1/m").tls, true);
  });

  it("AGENTD_REDIS_PASSWORD wins over a password in the URL; the sentinels' is separate", () => {
    const t = parseRedisUrl("redis://u:old@h", { password: "new", sentinelPassword: "sp" });
    assert.equal(t.password, "new");
    assert.equal(t.sentinelPassword, "sp");
    assert.equal(parseRedisUrl("redis://h", { password: "" }).password, undefined);
  });

  it("refuses hostile and mistaken URLs by name, never echoing the password", () => {
    refused("http://u:hunter2@h", /must start with redis:\/\//);
    refused("redis://u:hunter2@", /names no host/);
    refused("redis://u:hunter2@a,b", /use redis\+sentinel:\/\//);
    refused("redis+sentinel://u:hunter2@a,b", /needs the master name/);
    refused("redis+sentinel://a/bad$name", /needs the master name/);
    refused("redis://u:hunter2@h:70000", /port 70000 must be 1-65535/);
    refused("redis://u:hunter2@h:0", /port 0/);
    refused("redis://u:hunter2@h/16", /database 16 must be 0-15/);
    refused("redis://u:hunter2@h/x", /database 'x'/);
    refused("redis://u:hunter2@h/1/2", /too many parts/);
    refused("redis://u:hunter2@h?tls=1", /takes no query/);
    refused("redis://u:hunter2@h o", /'h o' is not HOST\[:PORT\]/);
    refused("redis://u:%E0%A4%A@h", /password is not valid percent-encoding/);
    refused(`redis+sentinel://${Array(17).fill("h").join(",")}/m`, /more than 16 sentinels/);
  });

  it("masks the password of any URL, parsable or not, and a secret inside any text", () => {
    assert.equal(maskRedisUrl("redis://agentd:hunter2@h:1/0"), "redis://agentd:***@h:1/0");
    assert.equal(maskRedisUrl("rediss+sentinel://:hunter2@a,b/m"), "rediss+sentinel://:***@a,b/m");
    assert.equal(maskRedisUrl("redis://h:6379"), "redis://h:6379");
    assert.equal(maskRedisUrl("redis://u:hun:ter@@h"), "redis://u:***@h");
    assert.equal(
      maskSecret("AUTH hunter2 failed hunter2", "hunter2", undefined),
      "AUTH *** failed ***",
    );
  });
});
