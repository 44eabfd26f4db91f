/**
 * Test helper: makes a Redis event log lose a run's events after a seq, the state an AOF
 * cut or a failover to a lagging replica leaves (stream and meta hash cut back together).
 * The real faults (an AOF cut with redis-check-aof --fix) are exercised in
 * internal/worker/log-rewound.test.ts; this is the quick form for the conformance suite.
 * Never used outside tests.
 */
import type { Redis } from "ioredis";

/** Keeps `runId`'s first `toSeq` events (stream and head), dropping the rest. */
export async function rewindRun(
  client: Redis,
  prefix: string,
  runId: string,
  toSeq: number,
): Promise<void> {
  const stream = `${prefix}run:${runId}:events`;
  const meta = `${prefix}run:${runId}:meta`;
  const rows = (await client.call("XRANGE", stream, "-", `0-${toSeq}`)) as [string, string[]][];
  const keep = rows.filter(([id]) => Number(id.split("-")[1]) <= toSeq);
  const last = keep.at(-1)?.[1][1] ?? "";
  const hash = /"hash":"([0-9a-f]{64})"/.exec(last)?.[1] ?? "";
  const m = client.multi().del(stream);
  for (const [id, fields] of keep) m.xadd(stream, id, ...fields);
  m.hset(meta, "seq", String(toSeq), "hash", hash, "ended", "");
  await m.exec();
}
