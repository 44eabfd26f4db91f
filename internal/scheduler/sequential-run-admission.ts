/**
 * RunAdmission for one process that owns both its embedded event log and its in-memory
 * queue (`agentd dev`): append, then enqueue. The two writes are not one step, but the
 * queue is memory of this same process: whatever kills the process between them kills the
 * whole queue too, and the next start queues every open run of the log again (cmd/agentd's
 * requeueOpenRuns). Must never be used with a queue that outlives the process (Redis).
 */
import type { LoggedEvent } from "../eventlog/event-codec.ts";
import type { EventLog } from "../eventlog/port.ts";
import type { AdmitRequest, RunAdmission } from "./admission.ts";
import type { MemoryRunQueue } from "./memory-run-queue.ts";
import { checkEnqueue } from "./options.ts";

export class SequentialRunAdmission implements RunAdmission {
  readonly #log: EventLog;
  readonly #queue: MemoryRunQueue;

  constructor(log: EventLog, queue: MemoryRunQueue) {
    this.#log = log;
    this.#queue = queue;
  }

  async admit(req: AdmitRequest): Promise<LoggedEvent> {
    const { first, priority } = req;
    const enqueue = {
      runId: first.runId,
      tenantId: first.tenantId,
      sessionId: first.sessionId,
      priority,
    };
    checkEnqueue(enqueue); // refused before anything is written, like the script
    const ev = await this.#log.append({ ...first, expectedSeq: 0 });
    await this.#queue.enqueue(enqueue);
    return ev;
  }
}
