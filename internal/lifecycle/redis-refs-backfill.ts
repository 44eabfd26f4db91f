/**
 * The artifact reference sets (`artifact:refs:{digest}`: the runs whose events name the
 * blob) for runs stored before the append script kept them: built once per Redis by reading
 * every run's events, before the first deletion decides that a blob is unreferenced. Appends
 * made meanwhile add their own references (the append script), so nothing is missed.
 *
 * Must never: mark the index built before every run stream was read.
 */
import type { Redis } from "ioredis";
import { wrapRedis } from "../eventlog/redis-error.ts";
import { logKeys } from "../eventlog/redis-log-keys.ts";
import { digestsOf } from "./run-digests.ts";

/** Builds the reference sets once (a marker key records it). */
export async function ensureArtifactRefs(client: Redis, prefix: string): Promise<void> {
  const marker = `${prefix}artifact:refs:indexed`;
  if ((await wrapRedis(client.exists(marker))) === 1) return;
  const keys = logKeys(prefix);
  let cursor = "0";
  do {
    const [next, found] = await wrapRedis(
      client.scan(cursor, "MATCH", `${prefix}run:*:events`, "COUNT", 500),
    );
    cursor = next;
    for (const key of found) {
      const runId = key.slice(`${prefix}run:`.length, -":events".length);
      if (keys.stream(runId) !== key) continue;
      await indexRun(client, keys, key, runId);
    }
  } while (cursor !== "0");
  await wrapRedis(client.set(marker, "1"));
}

async function indexRun(
  client: Redis,
  keys: ReturnType<typeof logKeys>,
  stream: string,
  runId: string,
): Promise<void> {
  let from = "-";
  for (;;) {
    const rows = (await wrapRedis(client.call("XRANGE", stream, from, "+", "COUNT", 500))) as [
      string,
      string[],
    ][];
    const digests = new Set<string>();
    for (const [, fields] of rows) for (const d of digestsOf(fields[1] ?? "")) digests.add(d);
    if (digests.size > 0) {
      const m = client.multi();
      for (const d of digests) m.sadd(keys.artifactRefs(d), runId);
      await wrapRedis(m.exec());
    }
    if (rows.length < 500) return;
    from = `(${rows[rows.length - 1]?.[0]}`;
  }
}
