/**
 * Test helpers for run deletion against a real server and Redis (internal/testing/api-fixtures
 * stack): a worker played by the test (claims through the real queue, appends with its
 * lease's fence, releases), runs driven to an end or to a pause for an approval, and a
 * look at everything Redis and the artifact directory still hold of a run.
 * Must never: leave a run claimed that a test did not mean to leave claimed.
 */
import assert from "node:assert/strict";
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import type { Redis } from "ioredis";
import { FsArtifactStore } from "../artifacts/fs-artifact-store.ts";
import type { EventPayload } from "../eventlog/event-codec.ts";
import type { RedisEventLog } from "../eventlog/redis-event-log.ts";
import {
  ApprovalRequestedSchema,
  ArtifactEmittedSchema,
  PreviewSchema,
  RunCompletedSchema,
  RunPausedSchema,
  RunStartedSchema,
} from "../gen/agentd/v1/events_pb.js";
import type { Claim } from "../scheduler/port.ts";
import { RedisRunQueue } from "../scheduler/redis-run-queue.ts";

export interface PlayedWorker {
  queue: RedisRunQueue;
  /** Claims until it gets `runId` (other runs claimed meanwhile are given back). */
  claim(runId: string): Promise<Claim>;
  /** Appends payloads with the claim's fence. */
  append(c: Claim, payloads: readonly EventPayload[]): Promise<number>;
  /** Claims, runs `payloads` then completes, releases "terminal". */
  finish(runId: string, payloads?: readonly EventPayload[]): Promise<void>;
  /** Claims, asks for an approval, releases "paused": the run waits for a person. Returns the approval id. */
  pause(runId: string): Promise<string>;
  close(): Promise<void>;
}

export function playWorker(
  client: Redis,
  log: RedisEventLog,
  id = "test-worker",
  leaseTtlMs = 60_000,
): PlayedWorker {
  const queue = new RedisRunQueue({ client, prefix: "agentd:", leaseTtlMs });
  const claim = async (runId: string): Promise<Claim> => {
    // Others handed out first are held until the run is found (a requeue keeps its place,
    // so giving each back at once would get it again), then given back.
    const others: Claim[] = [];
    try {
      for (let i = 0; i < 50; i++) {
        const c = await queue.claim(id, { blockMs: 2000 });
        if (c === undefined) continue;
        if (c.runId === runId) return c;
        others.push(c);
      }
    } finally {
      for (const o of others) await queue.release(o, { outcome: "requeue" });
    }
    throw new Error(`the queue never handed out run ${runId}`);
  };
  const append = async (c: Claim, payloads: readonly EventPayload[]): Promise<number> => {
    let seq = 0;
    for (const payload of payloads) {
      const ev = await log.append({
        runId: c.runId,
        sessionId: c.sessionId,
        payload,
        fence: c.lease.epoch,
      });
      seq = ev.seq;
    }
    return seq;
  };
  return {
    queue,
    claim,
    append,
    async finish(runId, payloads = []) {
      const c = await claim(runId);
      await append(c, [started(c.lease.epoch), ...payloads, completed()]);
      await queue.release(c, { outcome: "terminal" });
    },
    async pause(runId) {
      const c = await claim(runId);
      const approvalId = `apr_${runId}_${runId}`;
      await append(c, [
        started(c.lease.epoch),
        {
          case: "approvalRequested",
          value: create(ApprovalRequestedSchema, {
            approvalId,
            callId: "call_1",
            tool: "process.run",
            preview: create(PreviewSchema, { argv: ["rm", "a.txt"] }),
          }),
        },
        {
          case: "runPaused",
          value: create(RunPausedSchema, { reason: "approval", approvalId }),
        },
      ]);
      await queue.release(c, { outcome: "paused" });
      return approvalId;
    },
    close: () => queue.close(),
  };
}

export const started = (epoch: number): EventPayload => ({
  case: "runStarted",
  value: create(RunStartedSchema, { workerId: "test-worker", epoch: BigInt(epoch), image: "test" }),
});

export const completed = (): EventPayload => ({
  case: "runCompleted",
  value: create(RunCompletedSchema, {
    summary: "done",
    usage: { inputTokens: 1n, outputTokens: 1n },
  }),
});

/** Stores `content` in the artifact directory and answers its artifact.emitted payload. */
export async function emitted(
  artifactDir: string,
  name: string,
  content: string,
): Promise<{ digest: string; payload: EventPayload }> {
  const info = await new FsArtifactStore(artifactDir).put(Buffer.from(content));
  return {
    digest: info.digest,
    payload: {
      case: "artifactEmitted",
      value: create(ArtifactEmittedSchema, {
        name,
        digest: info.digest,
        sizeBytes: BigInt(info.size),
        mediaType: "text/plain",
      }),
    },
  };
}

/** Every key of the Redis with its type and the words of its value (for leftovers). */
export async function redisDump(client: Redis): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  let cursor = "0";
  do {
    const [next, keys] = await client.scan(cursor, "COUNT", 1000);
    cursor = next;
    for (const key of keys) {
      const type = await client.type(key);
      let text = "";
      if (type === "string") text = (await client.get(key)) ?? "";
      else if (type === "hash") text = JSON.stringify(await client.hgetall(key));
      else if (type === "set") text = JSON.stringify(await client.smembers(key));
      else if (type === "zset") text = JSON.stringify(await client.zrange(key, "0", "-1"));
      else if (type === "list") text = JSON.stringify(await client.lrange(key, 0, -1));
      else if (type === "stream") text = JSON.stringify(await client.xrange(key, "-", "+"));
      out.set(key, `${type} ${text}`);
    }
  } while (cursor !== "0");
  return out;
}

/** Keys whose name or value holds `needle`. */
export function mentioning(dump: Map<string, string>, needle: string): string[] {
  return [...dump].filter(([k, v]) => k.includes(needle) || v.includes(needle)).map(([k]) => k);
}

/** Every file under `dir` (relative paths). */
export function filesUnder(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string, rel: string): void => {
    let names: string[];
    try {
      names = readdirSync(d);
    } catch {
      return;
    }
    for (const n of names) {
      const p = join(d, n);
      if (statSync(p).isDirectory()) walk(p, join(rel, n));
      else out.push(join(rel, n));
    }
  };
  walk(dir, "");
  return out;
}

/** Asserts a stream of a run's events, as Redis holds it, is gone. */
export async function assertStreamGone(client: Redis, runId: string): Promise<void> {
  assert.equal(
    await client.exists(`agentd:run:${runId}:events`),
    0,
    `run ${runId}: its stream is gone`,
  );
  assert.equal(
    await client.exists(`agentd:run:${runId}:meta`),
    0,
    `run ${runId}: its meta is gone`,
  );
}
