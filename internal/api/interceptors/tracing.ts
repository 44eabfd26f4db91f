/**
 * One server span per RPC (`agentd.v1.RunService/CreateRun`, kind SERVER), continuing the
 * caller's W3C `traceparent`; the span's context is handed to the handler (kTraceContext)
 * so CreateRun can store it with the run. Streams end their span when the stream ends.
 * Attributes: the RPC's names and its outcome code only, never a message's content.
 */

import {
  ConnectError,
  type ContextKey,
  createContextKey,
  type Interceptor,
} from "@connectrpc/connect";
import { type Context, context, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { contextOfHeaders } from "../../telemetry/trace-context.ts";
import { tracer } from "../../telemetry/tracing.ts";

/** The RPC span's context (the caller's trace continued), for the handlers. */
export const kTraceContext: ContextKey<Context | undefined> = createContextKey<Context | undefined>(
  undefined,
  { description: "the trace context of the RPC's span" },
);

export function traceInterceptor(): Interceptor {
  return (next) => async (req) => {
    const parent = contextOfHeaders(req.header);
    const span = tracer().startSpan(
      `${req.method.parent.typeName}/${req.method.name}`,
      {
        kind: SpanKind.SERVER,
        attributes: {
          "rpc.system": "connect_rpc",
          "rpc.service": req.method.parent.typeName,
          "rpc.method": req.method.name,
        },
      },
      parent,
    );
    const ctx = trace.setSpan(parent, span);
    req.contextValues.set(kTraceContext, ctx);
    const fail = (err: unknown): never => {
      const code = ConnectError.from(err).code;
      span.setAttribute("rpc.connect_rpc.error_code", code);
      span.setStatus({ code: SpanStatusCode.ERROR, message: String(code) });
      span.end();
      throw err;
    };
    let res: Awaited<ReturnType<typeof next>>;
    try {
      res = await context.with(ctx, () => next(req));
    } catch (err) {
      return fail(err);
    }
    if (!res.stream) {
      span.end();
      return res;
    }
    const messages = res.message;
    return {
      ...res,
      message: (async function* () {
        let failed = false;
        try {
          yield* messages;
        } catch (err) {
          failed = true;
          fail(err);
        } finally {
          // Also when the client went away mid-stream (the generator is returned early).
          if (!failed) span.end();
        }
      })(),
    };
  };
}

/** Adds `agentd.*` attributes (ids and decisions only) to the RPC's span, if it records. */
export function annotateRpc(
  values: { get<T>(key: ContextKey<T>): T },
  attributes: Record<string, string>,
): void {
  const ctx = values.get(kTraceContext);
  if (ctx !== undefined) trace.getSpan(ctx)?.setAttributes(attributes);
}
