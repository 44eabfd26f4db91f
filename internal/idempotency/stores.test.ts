/** The idempotency conformance suite on both adapters: Redis (a real redis-server) and file. */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { Redis } from "ioredis";
import { ulid } from "ulid";
import { startRedis, type TestRedis } from "../testing/redis-server.ts";
import { runIdempotencyConformance } from "./conformance.ts";
import { FileIdempotencyStore } from "./file-idempotency.ts";
import { RedisIdempotencyStore } from "./redis-idempotency.ts";

let redis: TestRedis | undefined;
const prefix = `test:${ulid()}:`;
const extra: Redis[] = [];
let last: { ttlMs?: number; now?: () => number } = {};
runIdempotencyConformance("redis", {
  async open(opts) {
    redis ??= await startRedis();
    last = opts;
    return new RedisIdempotencyStore({ client: redis.client(), prefix, ...opts });
  },
  async others(n) {
    return Array.from({ length: n }, () => {
      const c = new Redis((redis as TestRedis).url);
      c.on("error", () => undefined);
      extra.push(c);
      return new RedisIdempotencyStore({ client: c, prefix, ...last });
    });
  },
  async reopen() {
    await (redis as TestRedis).restart({ hard: true });
    return new RedisIdempotencyStore({ client: (redis as TestRedis).client(), prefix, ...last });
  },
  async cleanup() {
    for (const c of extra) c.disconnect();
    await redis?.stop();
  },
});

const dir = mkdtempSync(join(tmpdir(), "agentd-idem-"));
let n = 0;
let path = "";
runIdempotencyConformance("file", {
  async open(opts) {
    path = join(dir, `s${n++}`, "idempotency.jsonl");
    last = opts;
    return new FileIdempotencyStore({ path, ...opts });
  },
  async reopen() {
    return new FileIdempotencyStore({ path, ...last });
  },
  async cleanup() {
    rmSync(dir, { recursive: true, force: true });
  },
});

it("file: a torn or malformed line is never a claim; a whole one is", async () => {
  const own = mkdtempSync(join(tmpdir(), "agentd-idem-hostile-"));
  try {
    const p = join(own, "idempotency.jsonl");
    const k = (key: string) =>
      createHash("sha256").update("t").update("\0").update(key).digest("hex");
    writeFileSync(
      p,
      [
        JSON.stringify({ k: k("whole"), c: { runId: "r1", digest: "d", at: 1 } }),
        JSON.stringify({ k: k("bad-at"), c: { runId: "r2", digest: "d", at: "soon" } }),
        JSON.stringify({ k: k("bad-run"), c: { runId: 5, digest: "d", at: 1 } }),
        "not json",
        `{"k":"${k("torn")}","c":{"runI`,
      ].join("\n"),
    );
    const s = new FileIdempotencyStore({ path: p, now: () => 2 });
    assert.equal((await s.claim("t", "whole", { runId: "a", digest: "d" }))?.runId, "r1");
    for (const key of ["bad-at", "bad-run", "torn"])
      assert.equal(await s.claim("t", key, { runId: "a", digest: "d" }), undefined, key);
  } finally {
    rmSync(own, { recursive: true, force: true });
  }
});
