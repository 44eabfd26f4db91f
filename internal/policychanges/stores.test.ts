/** The policy-change conformance suite on both adapters: Redis (a real redis-server) and file. */
import assert from "node:assert/strict";
import { appendFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { Redis } from "ioredis";
import { ulid } from "ulid";
import { startRedis, type TestRedis } from "../testing/redis-server.ts";
import { runPolicyChangeConformance, sampleChange } from "./conformance.ts";
import { FilePolicyChangeStore } from "./file-store.ts";
import { RedisPolicyChangeStore } from "./redis-store.ts";

let redis: TestRedis | undefined;
const prefix = `test:${ulid()}:`;
const extra: Redis[] = [];
runPolicyChangeConformance("redis", {
  async open() {
    redis ??= await startRedis();
    return new RedisPolicyChangeStore({ client: redis.client(), prefix });
  },
  async others(n) {
    return Array.from({ length: n }, () => {
      const c = new Redis((redis as TestRedis).url, (redis as TestRedis).clientOptions);
      c.on("error", () => undefined);
      extra.push(c);
      return new RedisPolicyChangeStore({ client: c, prefix });
    });
  },
  async reopen() {
    await (redis as TestRedis).restart({ hard: true });
    return new RedisPolicyChangeStore({ client: (redis as TestRedis).client(), prefix });
  },
  async cleanup() {
    for (const c of extra) c.disconnect();
    await redis?.stop();
  },
});

const dir = mkdtempSync(join(tmpdir(), "agentd-pchanges-"));
const path = join(dir, "policy-changes.jsonl");
let file: FilePolicyChangeStore | undefined;
runPolicyChangeConformance("file", {
  async open() {
    file ??= new FilePolicyChangeStore({ path });
    return file;
  },
  // One process owns the embedded log: other "servers" are the same store.
  async others(n) {
    return Array.from({ length: n }, () => file as FilePolicyChangeStore);
  },
  async reopen() {
    file = new FilePolicyChangeStore({ path });
    return file;
  },
  async cleanup() {
    rmSync(dir, { recursive: true, force: true });
  },
});

it("file store: a torn or hostile line is never a change", async () => {
  const d = mkdtempSync(join(tmpdir(), "agentd-pchanges-torn-"));
  const p = join(d, "policy-changes.jsonl");
  const s = new FilePolicyChangeStore({ path: p });
  const c = await s.propose(sampleChange({ tenantId: "torn" }));
  appendFileSync(p, '{"id":"pc_x","tenantId":"torn","state":"applied"}\n{"id": "pc_');
  const r = new FilePolicyChangeStore({ path: p });
  assert.deepEqual(
    (await r.list("torn")).map((x) => x.id),
    [c.id],
  );
  rmSync(d, { recursive: true, force: true });
});
