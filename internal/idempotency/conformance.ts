/**
 * The behaviour every IdempotencyStore must have, run against each adapter (Redis, file):
 * one claim wins among racers, a claim is per tenant, a held claim is returned as it is,
 * replace and release only touch the run they name, keys expire, and (where the adapter
 * persists) a restart keeps the claims. Tests only.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import type { IdempotencyStore } from "./port.ts";

export interface StoreFactory {
  /** A store on fresh storage, with the given clock and TTL. */
  open(opts: { ttlMs?: number; now?: () => number }): Promise<IdempotencyStore>;
  /** Several stores on one storage (other servers), when the adapter has such a thing. */
  others?(n: number): Promise<IdempotencyStore[]>;
  /** The same storage opened again (a restart). */
  reopen(): Promise<IdempotencyStore>;
  cleanup(): Promise<void>;
}

export function runIdempotencyConformance(name: string, f: StoreFactory): void {
  describe(`idempotency store conformance: ${name}`, () => {
    after(() => f.cleanup());
    let clock = 1_000_000;
    const now = () => clock;

    it("one of many concurrent claims of a key wins; the others get its claim", async () => {
      const store = await f.open({ now, ttlMs: 60_000 });
      const stores = [store, ...((await f.others?.(3)) ?? [])];
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          (stores[i % stores.length] as IdempotencyStore).claim("t1", "k-race", {
            runId: `run-${i}`,
            digest: `d-${i}`,
          }),
        ),
      );
      const winners = results.flatMap((r, i) => (r === undefined ? [i] : []));
      assert.equal(winners.length, 1, "exactly one claim wins");
      const w = winners[0] as number;
      for (const r of results)
        if (r !== undefined) assert.deepEqual([r.runId, r.digest], [`run-${w}`, `d-${w}`]);
    });

    it("keys are per tenant; release and replace touch only the run they name", async () => {
      const s = await f.open({ now, ttlMs: 60_000 });
      assert.equal(await s.claim("t1", "k", { runId: "a", digest: "da" }), undefined);
      assert.equal(await s.claim("t2", "k", { runId: "b", digest: "db" }), undefined);
      assert.equal((await s.claim("t1", "k", { runId: "c", digest: "dc" }))?.runId, "a");
      await s.release("t1", "k", "not-a");
      assert.equal(await s.replace("t1", "k", "not-a", { runId: "x", digest: "dx" }), false);
      assert.equal((await s.claim("t1", "k", { runId: "c", digest: "dc" }))?.runId, "a");
      assert.equal(await s.replace("t1", "k", "a", { runId: "x", digest: "dx" }), true);
      assert.equal((await s.claim("t1", "k", { runId: "c", digest: "dc" }))?.digest, "dx");
      await s.release("t1", "k", "x");
      assert.equal(await s.claim("t1", "k", { runId: "c", digest: "dc" }), undefined);
      assert.equal((await s.claim("t2", "k", { runId: "e", digest: "de" }))?.runId, "b");
    });

    it("a claim carries its time and is gone after the TTL", async () => {
      const s = await f.open({ now, ttlMs: 1000 });
      const at = clock;
      assert.equal(await s.claim("t1", "k-ttl", { runId: "a", digest: "d" }), undefined);
      assert.equal((await s.claim("t1", "k-ttl", { runId: "b", digest: "d" }))?.at, at);
      clock += 1500;
      // Redis expires by its own clock: give it the time too.
      await new Promise((r) => setTimeout(r, 1100));
      assert.equal(await s.claim("t1", "k-ttl", { runId: "b", digest: "d" }), undefined);
    });

    it("claims survive a restart", async () => {
      const s = await f.open({ now, ttlMs: 60_000 });
      assert.equal(await s.claim("t1", "k-restart", { runId: "a", digest: "d" }), undefined);
      const again = await f.reopen();
      assert.equal((await again.claim("t1", "k-restart", { runId: "b", digest: "d" }))?.runId, "a");
    });
  });
}
