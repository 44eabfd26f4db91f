/**
 * Tracing: every module gets its tracer here (OpenTelemetry API; the SDK is started by the
 * composition root from the standard OTEL_* variables). Without an SDK, spans are no-ops.
 * Attributes never carry secret values, tool inputs or outputs.
 */
import { context, type Span, SpanStatusCode, type Tracer, trace } from "@opentelemetry/api";

export const TRACER_NAME = "agentd";

export function tracer(): Tracer {
  return trace.getTracer(TRACER_NAME);
}

/** Ends `span` with an error status naming the error's code (never its message's data). */
export function endWithError(span: Span, err: unknown): void {
  const code = (err as { code?: string }).code ?? "error";
  span.setStatus({ code: SpanStatusCode.ERROR, message: code });
  span.end();
}

/** Runs `fn` in a child span of `parent` named `name`; its error code ends it in error. */
export async function inSpan<T>(parent: Span, name: string, fn: () => Promise<T>): Promise<T> {
  const ctx = trace.setSpan(context.active(), parent);
  const span = tracer().startSpan(name, {}, ctx);
  try {
    const value = await context.with(trace.setSpan(ctx, span), fn);
    span.end();
    return value;
  } catch (err) {
    endWithError(span, err);
    throw err;
  }
}
