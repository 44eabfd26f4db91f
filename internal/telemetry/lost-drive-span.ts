/**
 * The stand-in span of a lost drive. A worker that was SIGKILLed (or froze past its lease)
 * never exported its `invoke_agent agentd` span nor the `execute_tool` span of the call it
 * was running: the run's trace would show a hole and nothing would say a drive died. The
 * worker that takes the run over emits, in the run's trace, an `invoke_agent agentd` span
 * for it from what the log recorded (its worker, epoch and start), ended at the takeover
 * with status ERROR "worker lost" and `agentd.drive.lost=true`, one
 * `agentd.call.interrupted` event per call it started and never answered, and a link to the
 * lost drive's own span when the log recorded its id. The taker's drive span links to it.
 *
 * Must never: put a prompt, model text, a tool's input or output, or a secret in an
 * attribute (tool names, call ids, worker ids and epochs only); emit anything for a drive
 * that ended cleanly (the caller decides: only a takeover calls this).
 */
import {
  type Attributes,
  type Link,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
} from "@opentelemetry/api";
import { contextOf } from "./trace-context.ts";
import { tracer } from "./tracing.ts";

/** What the taker knows of the lost drive (worker/lost-drive.ts reads it from the log). */
export interface LostDriveInfo {
  runId: string;
  sessionId: string;
  traceParent: string;
  traceState: string;
  epoch: number;
  /** "" when the lost drive recorded no start. */
  workerId: string;
  startMs: number;
  /** Where the start time comes from (an event type, or "log.last_event"). */
  startFrom: string;
  /** The lost drive's own span id, when the log recorded it. */
  spanId?: string;
  interrupted: InterruptedCall[];
}

/** A call a lost drive started and never answered: its name and id, nothing of its data. */
export interface InterruptedCall {
  tool: string;
  callId: string;
  startedMs?: number;
}

export const LOST_STATUS = "worker lost";
export const INTERRUPTED_EVENT = "agentd.call.interrupted";

/** The event attributes of an interrupted call. */
export function interruptedAttributes(c: InterruptedCall): Attributes {
  return { "gen_ai.tool.name": c.tool, "gen_ai.tool.call.id": c.callId };
}

/**
 * Emits the stand-in (started at `info.startMs`, ended at `endMs`) and returns its span
 * context for the taker's link; undefined when tracing is off (a non-recording span).
 */
export function emitLostDriveSpan(info: LostDriveInfo, endMs: number): SpanContext | undefined {
  const parent = contextOf(info.traceParent, info.traceState);
  const attributes: Attributes = {
    "gen_ai.operation.name": "invoke_agent",
    "gen_ai.agent.name": "agentd",
    "gen_ai.agent.id": info.runId,
    "gen_ai.conversation.id": info.sessionId,
    "agentd.run.id": info.runId,
    "agentd.lease.epoch": info.epoch,
    "agentd.drive.lost": true,
    "agentd.drive.start_from": info.startFrom,
    "agentd.run.outcome": "lost",
    ...(info.workerId === "" ? {} : { "agentd.worker.id": info.workerId }),
  };
  const span = tracer().startSpan(
    "invoke_agent agentd",
    {
      kind: SpanKind.INTERNAL,
      attributes,
      startTime: Math.min(info.startMs, endMs),
      links: realSpanLink(parent, info.spanId),
    },
    parent,
  );
  if (!span.isRecording()) return undefined;
  for (const c of info.interrupted)
    span.addEvent(INTERRUPTED_EVENT, interruptedAttributes(c), c.startedMs ?? endMs);
  span.setStatus({ code: SpanStatusCode.ERROR, message: LOST_STATUS });
  span.end(endMs);
  return span.spanContext();
}

/** A link to the lost drive's own (never exported) span, in the run's trace. */
function realSpanLink(parent: ReturnType<typeof contextOf>, spanId?: string): Link[] {
  const traceId = trace.getSpanContext(parent)?.traceId;
  if (spanId === undefined || traceId === undefined) return [];
  return [
    {
      context: { traceId, spanId, traceFlags: TraceFlags.SAMPLED },
      attributes: { "agentd.link": "lost_drive_span" },
    },
  ];
}
