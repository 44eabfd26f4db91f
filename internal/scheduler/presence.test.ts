import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { ulid } from "ulid";
import { isAgentdError } from "../errors.ts";
import { startRedis, type TestRedis } from "../testing/redis-server.ts";
import { MemoryWorkerPresence } from "./memory-presence.ts";
import type { WorkerPresence } from "./presence.ts";
import { RedisWorkerPresence } from "./redis-presence.ts";

let redis: TestRedis | undefined;
after(async () => {
  await redis?.stop();
});

const adapters: [string, () => Promise<WorkerPresence>][] = [
  ["memory", async () => new MemoryWorkerPresence()],
  [
    "redis",
    async () => {
      redis ??= await startRedis();
      return new RedisWorkerPresence({ client: redis.client(), prefix: `test:${ulid()}:` });
    },
  ],
];

const until = async (what: string, probe: () => Promise<boolean>): Promise<void> => {
  const deadline = Date.now() + 30_000;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

for (const [name, open] of adapters) {
  describe(`WorkerPresence: ${name}`, () => {
    it("never seen: unknown; beating: alive; silent past its ttl: dead; beating again: alive", async () => {
      const p = await open();
      const id = `host:${ulid()}`;
      assert.equal(await p.stateOf(id), "unknown");
      await p.beat(id, 60_000);
      assert.equal(await p.stateOf(id), "alive");
      await p.beat(id, 50);
      await until(
        "the 50 ms ttl to pass without a beat",
        async () => (await p.stateOf(id)) === "dead",
      );
      await p.beat(id, 60_000);
      assert.equal(await p.stateOf(id), "alive");
      assert.equal(await p.stateOf(`host:${ulid()}`), "unknown", "another worker is not this one");
    });

    for (const bad of ["", "has space", "x".repeat(201)]) {
      it(`a worker id ${JSON.stringify(bad.slice(0, 12))}: refused naming worker_id`, async () => {
        const p = await open();
        await assert.rejects(
          p.beat(bad, 1000),
          (e: unknown) => isAgentdError(e, "EVALIDATION") && /worker_id/.test(String(e)),
        );
        await assert.rejects(p.stateOf(bad), (e: unknown) => isAgentdError(e, "EVALIDATION"));
      });
    }

    for (const ttl of [0, -1, 1.5]) {
      it(`a ttl of ${ttl}: refused naming ttl_ms`, async () => {
        const p = await open();
        await assert.rejects(
          p.beat("w:1", ttl),
          (e: unknown) => isAgentdError(e, "EVALIDATION") && /ttl_ms/.test(String(e)),
        );
      });
    }
  });
}
