/**
 * The spans of a run in a worker, on the OpenTelemetry GenAI conventions: one
 * `invoke_agent agentd` span per drive (a run paused and resumed, or taken over, has one per
 * worker that drove it, all in the run's trace: the trace context stored at CreateRun) and a
 * `chat {model}` span per model step with its token usage. Tool calls add `execute_tool`
 * spans in the kernel. Attributes: names, ids, counts and outcomes only — never a prompt,
 * a model's text, a tool's input or output, or a secret.
 */
import {
  type Context,
  context,
  type Link,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";
import {
  INTERRUPTED_EVENT,
  type InterruptedCall,
  interruptedAttributes,
} from "./lost-drive-span.ts";
import { contextOf } from "./trace-context.ts";
import { tracer } from "./tracing.ts";

export interface RunSpanInfo {
  runId: string;
  sessionId: string;
  traceParent: string;
  traceState: string;
  model: string;
  workerId: string;
  epoch: number;
  /** A taker's link to the stand-in of the drive it took the run over from. */
  links?: Link[];
  /** Calls the lost drive started and never answered (events on this span too). */
  interrupted?: InterruptedCall[];
}

export interface RunSpan {
  span: Span;
  /** The span's id, for the drive's start event; undefined when tracing is off. */
  spanId: string | undefined;
  /** The drive's context: spans started in `run()` are the drive's children. */
  run<T>(fn: () => Promise<T>): Promise<T>;
  end(outcome: string): void;
  fail(err: unknown): void;
}

export function startRunSpan(info: RunSpanInfo): RunSpan {
  const parent = contextOf(info.traceParent, info.traceState);
  const span = tracer().startSpan(
    "invoke_agent agentd",
    {
      kind: SpanKind.INTERNAL,
      attributes: {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "agentd",
        "gen_ai.agent.id": info.runId,
        "gen_ai.conversation.id": info.sessionId,
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": info.model,
        "agentd.run.id": info.runId,
        "agentd.worker.id": info.workerId,
        "agentd.lease.epoch": info.epoch,
      },
      links: info.links ?? [],
    },
    parent,
  );
  for (const c of info.interrupted ?? [])
    span.addEvent(INTERRUPTED_EVENT, interruptedAttributes(c));
  const ctx: Context = trace.setSpan(parent, span);
  return {
    span,
    // A span that records nothing carries its parent's context: not this drive's id.
    spanId: span.isRecording() ? span.spanContext().spanId : undefined,
    run: (fn) => context.with(ctx, fn),
    end(outcome) {
      span.setAttribute("agentd.run.outcome", outcome);
      span.end();
    },
    fail(err) {
      const code = (err as { code?: unknown })?.code;
      span.setStatus({
        code: SpanStatusCode.ERROR,
        message: typeof code === "string" ? code : "error",
      });
      span.end();
    },
  };
}

/** A `chat {model}` span for one model step (child of the active drive span). */
export function startChatSpan(model: string): Span {
  return tracer().startSpan(`chat ${model}`, {
    kind: SpanKind.CLIENT,
    attributes: {
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "openai",
      "gen_ai.request.model": model,
    },
  });
}
