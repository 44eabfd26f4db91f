/** RedisArtifactStore on a private redis-server: the conformance suite, retention, limits. */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { isAgentdError } from "../errors.ts";
import { startRedis, type TestRedis } from "../testing/redis-server.ts";
import { runArtifactStoreConformance } from "./conformance.ts";
import { RedisArtifactStore } from "./redis-artifact-store.ts";

let redis: TestRedis;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis?.stop();
});

runArtifactStoreConformance("redis", {
  store: () => new RedisArtifactStore({ client: redis.client(), prefix: "t1:" }),
  leftovers: async () => redis.client().keys("t1:artifact:tmp:*"),
});

it("retention: a blob expires after it, a repeated store renews it; 0 keeps it", async () => {
  const c = redis.client();
  const s = new RedisArtifactStore({ client: c, prefix: "t2:", retentionMs: 1000 });
  const a = await s.put(Buffer.from("kept a while"));
  const ttl = await c.pttl(`t2:artifact:${a.digest}`);
  assert.ok(ttl > 0 && ttl <= 1000, `ttl ${ttl}`);
  assert.ok((await c.pttl(`t2:artifact:${a.digest}:chunks`)) > 0, "the chunks expire with it");
  await new Promise((r) => setTimeout(r, 1200));
  assert.equal(await s.stat(a.digest), undefined, "gone after the retention");
  const keep = new RedisArtifactStore({ client: c, prefix: "t3:" });
  const b = await keep.put(Buffer.from("kept"));
  assert.equal(await c.pttl(`t3:artifact:${b.digest}`), -1, "no expiry");
});

it("a store-wide cap on blob size, whatever the caller asks", async () => {
  const s = new RedisArtifactStore({ client: redis.client(), prefix: "t4:", maxBlobBytes: 2048 });
  await assert.rejects(
    s.put(Buffer.alloc(4096)),
    (e: unknown) => isAgentdError(e, "ETOOLARGE") && /2048 bytes/.test((e as Error).message),
  );
  await assert.rejects(s.stat("not-a-digest"), (e: unknown) => isAgentdError(e, "EVALIDATION"));
});

it("a blob whose chunks vanished before its meta is stored again, not renewed empty", async () => {
  const c = redis.client();
  const s = new RedisArtifactStore({ client: c, prefix: "t5:" });
  const a = await s.put(Buffer.alloc(3000, 5));
  await c.del(`t5:artifact:${a.digest}:chunks`); // evicted or expired first
  await s.put(Buffer.alloc(3000, 5));
  const back: Buffer[] = [];
  for await (const part of s.read(a.digest)) back.push(Buffer.from(part));
  assert.ok(Buffer.concat(back).equals(Buffer.alloc(3000, 5)));
  // And storing it again while whole renews its expiry (retention).
  const r = new RedisArtifactStore({ client: c, prefix: "t5:", retentionMs: 60_000 });
  await r.put(Buffer.alloc(3000, 5));
  assert.ok((await c.pttl(`t5:artifact:${a.digest}`)) > 50_000, "renewed");
});

it("the same content from five writers at once: one blob, no temporary list left", async () => {
  const c = redis.client();
  const s = new RedisArtifactStore({ client: c, prefix: "t6:" });
  const body = Buffer.alloc(2.5 * 1024 * 1024, 9);
  const infos = await Promise.all(Array.from({ length: 5 }, () => s.put(body)));
  assert.equal(new Set(infos.map((i) => i.digest)).size, 1);
  assert.deepEqual(await c.keys("t6:artifact:tmp:*"), []);
  assert.equal(await c.llen(`t6:artifact:${infos[0]?.digest}:chunks`), 3);
});

it("a full Redis: the write fails with a clear error and leaves nothing behind", async () => {
  const c = redis.client();
  const s = new RedisArtifactStore({ client: c, prefix: "t7:" });
  const used = Number(/used_memory:(\d+)/.exec(await c.info("memory"))?.[1]);
  await c.config("SET", "maxmemory", String(used + 2 * 1024 * 1024));
  await c.config("SET", "maxmemory-policy", "noeviction");
  try {
    await assert.rejects(
      s.put(Buffer.alloc(8 * 1024 * 1024, 1)),
      (e: unknown) =>
        isAgentdError(e, "EUNAVAILABLE") && /out of memory/.test((e as Error).message),
    );
    assert.deepEqual(await c.keys("t7:artifact:*"), [], "no blob, no temporary list");
  } finally {
    await c.config("SET", "maxmemory", "0");
  }
});
