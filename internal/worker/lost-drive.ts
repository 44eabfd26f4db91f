/**
 * What the log says of a drive that was lost (its worker stopped renewing the lease, e.g.
 * SIGKILL, and this worker's claim took the run over): its worker and epoch, when it began,
 * the span id it recorded, and the calls it started and never answered. The taker closes
 * that drive's trace with a stand-in span from this (telemetry/lost-drive-span.ts).
 *
 * Must never: carry a call's input or output, a prompt or model text (only tool names and
 * call ids leave this module), or trust a recorded span id that is not 16 hex digits.
 */
import { projectHistory } from "../engine/context.ts";
import type { Event } from "../gen/agentd/v1/events_pb.js";

export interface LostDrive {
  /** The lost drive's lease epoch (the one before the taker's). */
  epoch: number;
  /** Its worker id (`host:pid`); "" when it recorded no start. */
  workerId: string;
  /** When it began, ms since the epoch: its run.started/run.resumed, else the log's last event. */
  startMs: number;
  /** The event type the start time comes from. */
  startFrom: "run.started" | "run.resumed" | "log.last_event" | "none";
  /** Its `invoke_agent agentd` span id, when it recorded one (16 hex digits). */
  spanId?: string;
  /** Calls it started (tool.started) and never answered: tool name and call id only. */
  interrupted: { tool: string; callId: string; startedMs?: number }[];
}

const SPAN_ID = /^[0-9a-f]{16}$/;

/** Ms since the epoch of an event's server time (undefined when it has none). */
export function eventMs(e: Event | undefined): number | undefined {
  if (e?.ts === undefined) return undefined;
  return Number(e.ts.seconds) * 1000 + Math.floor(e.ts.nanos / 1e6);
}

/**
 * The drive of epoch `epoch - 1`, as `events` (the whole log, read by the taker before it
 * appended anything) record it; `now` when the log has no time at all.
 */
export function lostDriveOf(events: readonly Event[], epoch: number, now: number): LostDrive {
  const lostEpoch = epoch - 1;
  // The first: a drive that held an approval and went on records run.resumed again.
  const start = events.find((e) => {
    const p = e.payload;
    return (
      (p.case === "runStarted" || p.case === "runResumed") && Number(p.value.epoch) === lostEpoch
    );
  });
  const p = start?.payload;
  const own = p?.case === "runStarted" || p?.case === "runResumed" ? p.value : undefined;
  const startMs = eventMs(start) ?? eventMs(events.at(-1));
  const spanId = own?.spanId ?? "";
  return {
    epoch: lostEpoch,
    workerId: own?.workerId ?? "",
    startMs: startMs ?? now,
    startFrom:
      start?.type === "run.started" || start?.type === "run.resumed"
        ? start.type
        : startMs === undefined
          ? "none"
          : "log.last_event",
    ...(SPAN_ID.test(spanId) && spanId !== "0000000000000000" ? { spanId } : {}),
    interrupted: interruptedCalls(events),
  };
}

/** Calls with tool.started and no tool.result, with when they started. */
function interruptedCalls(events: readonly Event[]): LostDrive["interrupted"] {
  const startedAt = new Map<string, number | undefined>();
  for (const e of events)
    if (e.payload.case === "toolStarted") startedAt.set(e.payload.value.callId, eventMs(e));
  return projectHistory(events)
    .pending.filter((c) => c.started)
    .map((c) => {
      const ms = startedAt.get(c.callId);
      return { tool: c.tool, callId: c.callId, ...(ms === undefined ? {} : { startedMs: ms }) };
    });
}
