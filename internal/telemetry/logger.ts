/**
 * pino JSON logs: one line per record, to stdout; a line written in a span carries its
 * `trace_id` and `span_id` (W3C hex, the names OpenTelemetry's log data model uses). Never
 * log tokens or secret values.
 */
import { isSpanContextValid, trace } from "@opentelemetry/api";
import { type Logger, pino } from "pino";

export type { Logger };

export interface LoggerOptions {
  /** pino level; default "info". */
  level?: string;
  /** Component name in every line. */
  name?: string;
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  return pino({
    level: opts.level ?? "info",
    name: opts.name ?? "agentd",
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    mixin: traceIds,
    redact: {
      paths: ["req.headers.authorization", "authorization", "token"],
      censor: "[redacted]",
    },
  });
}

/** The active span's ids, for the log line being written ({} outside a span). */
function traceIds(): Record<string, string> {
  const sc = trace.getActiveSpan()?.spanContext();
  if (sc === undefined || !isSpanContextValid(sc)) return {};
  return { trace_id: sc.traceId, span_id: sc.spanId };
}
