/**
 * Test helper: the AOF cut a Redis operator meets after a crash, done on a test Redis
 * (redis-server.ts) for real. `aofOffset` notes how far the append-only file is now;
 * `cutAofTo` (with the server stopped) truncates it back to that offset and repairs it with
 * `redis-check-aof --fix`, exactly what an operator runs when Redis refuses a torn AOF.
 * Every write acknowledged after the noted offset is lost. Never used outside tests.
 */
import { execFileSync } from "node:child_process";
import { readFileSync, statSync, truncateSync } from "node:fs";
import { join } from "node:path";

/** The incremental AOF file of Redis 7's multi-part AOF (named by its manifest). */
function incrFile(dir: string): string {
  const manifest = readFileSync(join(dir, "appendonlydir", "appendonly.aof.manifest"), "utf8");
  const name = /file (\S+) seq \d+ type i/.exec(manifest)?.[1];
  if (name === undefined) throw new Error(`no incremental AOF in the manifest:\n${manifest}`);
  return join(dir, "appendonlydir", name);
}

/** The incremental AOF's size now: everything written so far is before it. */
export function aofOffset(dir: string): number {
  return statSync(incrFile(dir)).size;
}

/**
 * With the server stopped: cuts the AOF back to `offset` and repairs it
 * (redis-check-aof --fix, answering its question). Returns the tool's report.
 */
export function cutAofTo(dir: string, offset: number): string {
  const file = incrFile(dir);
  truncateSync(file, offset);
  return execFileSync(
    "redis-check-aof",
    ["--fix", join(dir, "appendonlydir", "appendonly.aof.manifest")],
    { input: "y\n", encoding: "utf8" },
  );
}
