/**
 * The two run timings of the metrics: how long a run waited in the queue before a drive
 * claimed it (agentd_queue_wait_seconds) and how long it lived from run.queued to its end
 * (agentd_run_duration_seconds, by outcome). Both measure from the run's first event's `ts`.
 * Must never: delay or fail an append (the end's read of run.queued happens after the
 * append returned, and a failed read only loses that one observation).
 */
import { timestampMs } from "@bufbuild/protobuf/wkt";
import type { LoggedEvent } from "../eventlog/event-codec.ts";
import type { EventLog } from "../eventlog/port.ts";
import type { Event } from "../gen/agentd/v1/events_pb.js";
import { metrics } from "./metrics.ts";

const OUTCOMES: Record<string, string> = {
  "run.completed": "completed",
  "run.failed": "failed",
  "run.cancelled": "cancelled",
};

/** The run's end outcome label for an event type, or undefined when it is not an end. */
export function endOutcome(type: string): string | undefined {
  return OUTCOMES[type];
}

/**
 * A drive opened the run (`events` as it read them) at `claimedAt`: when the run never
 * started, the time since its run.queued is its queue wait. A run given back before it
 * started (SIGTERM, a lost lease) is counted again by its next drive, from run.queued.
 */
export function observeQueueWait(events: readonly Event[], claimedAt: number): void {
  const first = events[0];
  if (first?.payload.case !== "runQueued" || first.ts === undefined) return;
  if (events.some((e) => e.payload.case === "runStarted")) return;
  metrics.queueWait.observe(Math.max(0, claimedAt - timestampMs(first.ts)) / 1000);
}

/**
 * `ended` (a run.completed, run.failed or run.cancelled just appended to `log`): observes the
 * run's duration once its run.queued is read, off the append's path. Resolves when observed
 * (or skipped); never rejects.
 */
export async function observeRunEnd(log: EventLog, ended: LoggedEvent): Promise<void> {
  try {
    const outcome = endOutcome(ended.event.type);
    const end = ended.event.ts;
    if (outcome === undefined || end === undefined) return;
    const first = (await log.read(ended.runId, 0, 1))[0]?.event;
    if (first?.payload.case !== "runQueued" || first.ts === undefined) return;
    const seconds = Math.max(0, timestampMs(end) - timestampMs(first.ts)) / 1000;
    metrics.runDuration.observe({ outcome }, seconds);
  } catch {
    // A metric, not a record: the run's end is stored; only this observation is lost.
  }
}
