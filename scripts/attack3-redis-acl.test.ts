/**
 * Attack (#28 review, Redis ACL): the deployments say agentd's Redis user reaches "its own
 * keys only" (`~agentd:*`, deploy/README.md; docs/operations.md), but the rule they ship —
 * `user agentd on >PW ~agentd:* &* +@all -@admin` in deploy/compose/docker-compose.yml,
 * docker-compose.sentinel.yml and deploy/kubernetes/base/redis.yaml — takes away only
 * @admin. Commands that name no key are not held by a key pattern at all, and FLUSHALL,
 * FLUSHDB and SWAPDB are @keyspace/@dangerous, not @admin: agentd's user (a compromised or
 * buggy server, anyone holding AGENTD_REDIS_PASSWORD) wipes every key of a shared Redis,
 * other applications' included, and lists their key names (KEYS, SCAN).
 *
 * The test starts a real redis-server, gives the user `agentd` exactly the rule each
 * deployment file ships (read from the file), and checks that the user cannot remove a key
 * outside `agentd:*`.
 *
 * What must hold: the `agentd` user of every shipped deployment cannot remove or read keys
 * outside its prefix (e.g. `-@dangerous` plus the few commands agentd needs, or at least
 * `-flushall -flushdb -swapdb -keys`).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { startRedis, type TestRedis } from "../internal/testing/redis-server.ts";

const ROOT = join(import.meta.dirname, "..");
const FILES = [
  "deploy/compose/docker-compose.yml",
  "deploy/compose/docker-compose.sentinel.yml",
  "deploy/kubernetes/base/redis.yaml",
];

/** The ACL rules after `user agentd` in a deployment file, the password made `>pw`. */
function shippedRule(file: string): string[] {
  const text = readFileSync(join(ROOT, file), "utf8");
  const line = /^\s*user agentd (.+)$/m.exec(text)?.[1];
  assert.ok(line !== undefined, `${file} defines the user agentd`);
  return line
    .trim()
    .split(/\s+/)
    .map((w) => (w.startsWith(">") ? ">pw-attack3" : w));
}

let redis: TestRedis;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis?.stop();
});

describe("the shipped Redis ACL of agentd", { timeout: 60_000 }, () => {
  for (const file of FILES) {
    it(`${file}: agentd's user cannot wipe or list keys outside agentd:*`, async () => {
      const admin = redis.client();
      const rule = shippedRule(file);
      assert.ok(rule.includes("~agentd:*"), `${file}: ${rule.join(" ")}`);
      await admin.call("ACL", "SETUSER", "agentd", "reset", ...rule);
      await admin.set("other-app:orders", "kept");
      await admin.set("agentd:probe", "1");
      const agentd = new Redis({
        host: "127.0.0.1",
        port: redis.port,
        username: "agentd",
        password: "pw-attack3",
        maxRetriesPerRequest: 1,
      });
      agentd.on("error", () => undefined);
      try {
        // The rule works for its own keys...
        assert.equal(await agentd.get("agentd:probe"), "1");
        await assert.rejects(agentd.get("other-app:orders"), /NOPERM/);
        // ...and for nothing else.
        const got: string[] = [];
        const listed = await agentd.keys("*").catch(() => [] as string[]);
        if (listed.includes("other-app:orders")) got.push("KEYS lists other-app:orders");
        const flushed = await agentd.flushall().then(
          () => true,
          () => false,
        );
        if (flushed) got.push("FLUSHALL was accepted");
        if ((await admin.get("other-app:orders")) !== "kept") got.push("other-app:orders is gone");
        assert.deepEqual(got, [], `${file}: ${rule.join(" ").replace(">pw-attack3", ">…")}`);
      } finally {
        agentd.disconnect();
      }
    });
  }
});
