/**
 * The run.queued of a run (seq 1: tenant, labels, trace context — what never changes),
 * read once and kept for many runs (the oldest go first past `max`). For readers that ask
 * it per event (the tenant feed's label filter, the OTLP sink's trace correlation).
 */
import type { RunQueued } from "../gen/agentd/v1/events_pb.js";
import type { EventLog } from "./port.ts";

export function createRunOriginCache(
  log: EventLog,
  max = 10_000,
): (runId: string) => Promise<RunQueued | undefined> {
  const cache = new Map<string, RunQueued | undefined>();
  return async (runId) => {
    if (cache.has(runId)) return cache.get(runId);
    const first = (await log.read(runId, 0, 1))[0]?.event.payload;
    const origin = first?.case === "runQueued" ? first.value : undefined;
    if (cache.size >= max) cache.delete(cache.keys().next().value as string);
    cache.set(runId, origin);
    return origin;
  };
}
