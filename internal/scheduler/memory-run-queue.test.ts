import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type FileEventLog, openFileEventLog } from "../eventlog/file-event-log.ts";
import { runRunQueueConformance } from "./conformance.ts";
import { MemoryRunQueue } from "./memory-run-queue.ts";
import type { SchedulerOptions } from "./options.ts";

// `agentd dev` wiring: the embedded event log holds the epochs.
const dir = mkdtempSync(join(tmpdir(), "agentd-memqueue-"));
let log: FileEventLog | undefined;
let last: MemoryRunQueue | undefined;

runRunQueueConformance("memory", {
  async open(opts: SchedulerOptions) {
    log ??= await openFileEventLog({ dir });
    last = new MemoryRunQueue({ ...opts, log });
    return { queue: last, log };
  },
  async more(n) {
    // One process: every worker shares the one queue object.
    return Array.from({ length: n }, () => last as MemoryRunQueue);
  },
  async cleanup() {
    await log?.close();
    rmSync(dir, { recursive: true, force: true });
  },
});
