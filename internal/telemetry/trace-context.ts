/**
 * W3C trace context for runs: read the caller's `traceparent` (whether or not this process
 * runs the OpenTelemetry SDK: the propagator is used directly, not through the global API),
 * store it with the run, and continue it in every worker that drives the run. Must never:
 * accept anything but a well-formed traceparent (a malformed header starts a fresh trace).
 */
import { randomBytes } from "node:crypto";
import {
  type Context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  isSpanContextValid,
  ROOT_CONTEXT,
  trace,
} from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";

const propagator = new W3CTraceContextPropagator();

export interface TraceParent {
  traceParent: string;
  traceState: string;
}

/** The context a `traceparent` (and `tracestate`) names; ROOT_CONTEXT when malformed. */
export function contextOf(traceParent: string, traceState = ""): Context {
  if (traceParent === "") return ROOT_CONTEXT;
  const carrier: Record<string, string> = { traceparent: traceParent };
  if (traceState !== "") carrier.tracestate = traceState;
  return propagator.extract(ROOT_CONTEXT, carrier, defaultTextMapGetter);
}

/** The caller's context from request headers (`traceparent`, `tracestate`). */
export function contextOfHeaders(headers: Headers): Context {
  return contextOf(headers.get("traceparent") ?? "", headers.get("tracestate") ?? "");
}

/**
 * The trace context to store with a new run: the span of `ctx` (the CreateRun span, or the
 * caller's), or a fresh sampled trace when there is none, so that every worker adds to one
 * trace even when nobody sent one.
 */
export function traceParentFor(ctx: Context): TraceParent {
  const sc = trace.getSpanContext(ctx);
  if (sc === undefined || !isSpanContextValid(sc))
    return {
      traceParent: `00-${randomBytes(16).toString("hex")}-${randomBytes(8).toString("hex")}-01`,
      traceState: "",
    };
  const carrier: Record<string, string> = {};
  propagator.inject(trace.setSpanContext(ROOT_CONTEXT, sc), carrier, defaultTextMapSetter);
  return { traceParent: carrier.traceparent ?? "", traceState: carrier.tracestate ?? "" };
}
