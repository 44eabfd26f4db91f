import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ulid } from "ulid";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { RedisEventLog } from "../eventlog/redis-event-log.ts";
import { startRedis, type TestRedis } from "../testing/redis-server.ts";
import { runAdmissionConformance } from "./admission-conformance.ts";
import { MemoryRunQueue } from "./memory-run-queue.ts";
import { RedisRunAdmission } from "./redis-run-admission.ts";
import { RedisRunQueue } from "./redis-run-queue.ts";
import { SequentialRunAdmission } from "./sequential-run-admission.ts";

let redis: TestRedis | undefined;
runAdmissionConformance("redis", {
  async open() {
    redis ??= await startRedis();
    // A fresh prefix per test: an empty log and queue on the same server.
    const prefix = `test:${ulid()}:`;
    const client = redis.client();
    return {
      admission: new RedisRunAdmission({ client, prefix }),
      log: new RedisEventLog({ client, prefix }),
      queue: new RedisRunQueue({ client, prefix }),
    };
  },
  async cleanup() {
    await redis?.stop();
  },
});

const dirs: string[] = [];
const logs: FileEventLog[] = [];
runAdmissionConformance("embedded (file log, memory queue)", {
  async open() {
    const dir = mkdtempSync(join(tmpdir(), "agentd-admission-"));
    dirs.push(dir);
    const log = await openFileEventLog({ dir });
    logs.push(log);
    const queue = new MemoryRunQueue({ log });
    return { admission: new SequentialRunAdmission(log, queue), log, queue };
  },
  async cleanup() {
    for (const l of logs) await l.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  },
});
