/** ExportState conformance: the Redis adapter (a private redis-server) and the file adapter. */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { startRedis, type TestRedis } from "../testing/redis-server.ts";
import { FileExportState } from "./file-export-state.ts";
import { RedisExportState } from "./redis-export-state.ts";
import { DEAD_LETTERS_MAX, type DeadLetter, type ExportState } from "./state.ts";

const letter = (n: number): DeadLetter => ({
  cursor: `1-0:${n}`,
  eventId: `ev${n}`,
  type: "run.queued",
  runId: "r",
  attempts: 3,
  error: "HTTP 500",
  at: new Date(0).toISOString(),
});

function conformance(name: string, open: () => ExportState): void {
  describe(`ExportState conformance: ${name}`, () => {
    it("one holder at a time; renewal by the holder; free again after release or expiry", async () => {
      const s = open();
      assert.equal(await s.lease("a", "h1", 300), true);
      assert.equal(await s.lease("a", "h2", 300), false, "held by h1");
      assert.equal(await s.lease("a", "h1", 300), true, "h1 renews");
      await s.release("a", "h2"); // not h2's: nothing happens
      assert.equal(await s.lease("a", "h2", 300), false);
      await s.release("a", "h1");
      assert.equal(await s.lease("a", "h2", 200), true, "free after release");
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(await s.lease("a", "h3", 300), true, "free after expiry");
    });

    it("the cursor: written only by the lease holder, read back by anyone", async () => {
      const s = open();
      assert.equal(await s.cursor("b"), "");
      assert.equal(await s.setCursor("b", "h1", "1-0:1"), false, "no lease: nothing written");
      assert.equal(await s.cursor("b"), "");
      await s.lease("b", "h1", 5000);
      assert.equal(await s.setCursor("b", "h1", "1-0:2"), true);
      assert.equal(await s.setCursor("b", "h2", "9-0:9"), false, "a stale holder is fenced");
      assert.equal(await open().cursor("b"), "1-0:2", "another process reads it");
    });

    it("dead letters: newest first, bounded", async () => {
      const s = open();
      for (let i = 1; i <= 3; i++) await s.deadLetter("c", letter(i));
      assert.deepEqual(
        (await s.deadLetters("c", 10)).map((l) => l.eventId),
        ["ev3", "ev2", "ev1"],
      );
      assert.deepEqual(
        (await s.deadLetters("c", 1)).map((l) => l.eventId),
        ["ev3"],
      );
      assert.deepEqual(await s.deadLetters("c", 0), []);
      assert.ok(DEAD_LETTERS_MAX >= 1000);
    });
  });
}

let redis: TestRedis;
const dir = mkdtempSync(join(tmpdir(), "agentd-export-state-"));
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

conformance("redis", () => new RedisExportState(redis.client(), "agentd:"));
// One process owns a data directory: "another process" is another object on it, whose
// leases start empty (the file adapter's leases live in memory).
const shared = new FileExportState(join(dir, "export"));
conformance("file", () => shared);
