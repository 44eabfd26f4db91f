/**
 * The AgentEngine adapter on the AI SDK (`ai` streamText + any LanguageModel, e.g.
 * `@ai-sdk/openai`'s chat model on an OpenAI-compatible base URL).
 *
 * One `run` = one model step (streamText's default stop condition: one step). Tools are
 * declared with `tool({ description, inputSchema })` and NO execute: the engine never
 * runs anything (invariant 3); tool calls come out as events for the worker and kernel.
 * Transient failures (network, timeouts, 408/409/5xx, 429) are retried here with
 * exponential backoff and jitter, a bounded number of times, and ONLY while nothing has
 * been yielded for the step (so text is never duplicated). 401/403 fail at once.
 *
 * Must never: execute a tool, log or echo the API key, throw out of `run` (every failure
 * is an `error` event), or reach any endpoint but the model's (no gateway model strings).
 */
import { setTimeout as delay } from "node:timers/promises";
import { createOpenAI } from "@ai-sdk/openai";
import {
  APICallError,
  type AssistantModelMessage,
  InvalidPromptError,
  InvalidResponseDataError,
  InvalidToolInputError,
  JSONParseError,
  type JSONSchema7,
  type JSONValue,
  jsonSchema,
  type LanguageModel,
  LoadAPIKeyError,
  MissingToolResultsError,
  type ModelMessage,
  NoSuchToolError,
  StreamProviderError,
  streamText,
  type Tool,
  TypeValidationError,
  tool,
} from "ai";
import { AgentdError } from "../errors.ts";
import type {
  AgentEngine,
  EngineError,
  EngineEvent,
  EngineMessage,
  EngineRequest,
  EngineToolSpec,
} from "./port.ts";

/** A model object (never a gateway model-id string: that would route to another host). */
export type EngineModel = Exclude<LanguageModel, string>;

export interface AiSdkEngineOptions {
  model: EngineModel;
  /** Retries of a transient failure before anything was yielded (default 3). */
  maxRetries?: number;
  /** First backoff delay; doubles each retry, plus up to 50% jitter (default 500 ms). */
  retryBaseMs?: number;
  /** Cap of one backoff delay, retry-after included (default 30 s). */
  maxRetryDelayMs?: number;
  /** An attempt with no stream data for this long is aborted as a timeout (default 120 s). */
  idleTimeoutMs?: number;
  /** Jitter source in [0, 1) (tests pin it). */
  random?: () => number;
  /** Called before each retry's wait (logs, metrics). */
  onRetry?: (info: { attempt: number; delayMs: number; error: EngineError }) => void;
}

export function createAiSdkEngine(opts: AiSdkEngineOptions): AgentEngine {
  const cfg = {
    model: opts.model,
    maxRetries: opts.maxRetries ?? 3,
    retryBaseMs: opts.retryBaseMs ?? 500,
    maxRetryDelayMs: opts.maxRetryDelayMs ?? 30_000,
    idleTimeoutMs: opts.idleTimeoutMs ?? 120_000,
    random: opts.random ?? Math.random,
    onRetry: opts.onRetry,
  };
  return {
    async *run(req: EngineRequest, signal: AbortSignal): AsyncGenerator<EngineEvent> {
      let prepared: Prepared;
      try {
        prepared = prepare(req);
      } catch (err) {
        yield { type: "error", error: classify(err).error };
        return;
      }
      for (let attempt = 0; ; attempt++) {
        if (signal.aborted) {
          yield { type: "error", error: aborted() };
          return;
        }
        const outcome = yield* attemptStep(cfg, req, prepared, signal);
        if (outcome.ok) return;
        const { error, retryAfterMs } = outcome;
        if (outcome.emitted || !error.retryable || attempt >= cfg.maxRetries) {
          yield { type: "error", error };
          return;
        }
        const delayMs = backoff(cfg, attempt, retryAfterMs);
        cfg.onRetry?.({ attempt: attempt + 1, delayMs, error });
        await delay(delayMs, undefined, { signal }).catch(() => undefined);
      }
    },
  };
}

/** The OpenAI chat-completions model for the composition root (any compatible base URL). */
export function createOpenAiModel(o: {
  baseURL?: string;
  apiKey: string;
  model: string;
  /** A fetch to use instead of the global one (tests count or intercept requests). */
  fetch?: typeof globalThis.fetch;
}): EngineModel {
  if (o.apiKey === "") {
    throw new AgentdError("EVALIDATION", "apiKey: the model API key is empty", {
      field: "apiKey",
    });
  }
  if (o.model === "") {
    throw new AgentdError("EVALIDATION", "model: the model id is empty", { field: "model" });
  }
  const provider = createOpenAI({
    apiKey: o.apiKey,
    ...(o.baseURL === undefined ? {} : { baseURL: o.baseURL.replace(/\/+$/, "") }),
    ...(o.fetch === undefined ? {} : { fetch: o.fetch }),
  });
  return provider.chat(o.model);
}

// ---------------------------------------------------------------------------------------
// Request preparation: tool names and messages in the SDK's shapes.

interface Prepared {
  tools: Record<string, Tool>;
  messages: ModelMessage[];
  /** wire (provider) tool name → agentd tool name. */
  fromWire: Map<string, string>;
}

/**
 * OpenAI function names must match ^[a-zA-Z0-9_-]{1,64}$, and agentd's have dots
 * ("repo.read"): every other character becomes "_" on the wire and is mapped back.
 */
export function wireToolName(name: string): string {
  return name.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 64);
}

class BadRequest extends Error {}

function prepare(req: EngineRequest): Prepared {
  const fromWire = new Map<string, string>();
  const tools: Record<string, Tool> = {};
  for (const spec of req.tools) {
    const wire = wireToolName(spec.name);
    if (wire === "" || fromWire.has(wire)) {
      throw new BadRequest(`tool name ${JSON.stringify(spec.name)} is empty or collides`);
    }
    fromWire.set(wire, spec.name);
    tools[wire] = declareTool(spec);
  }
  return { tools, messages: toModelMessages(req.messages), fromWire };
}

/** A declaration only: description and schema, no execute (the engine never runs tools). */
function declareTool(spec: EngineToolSpec): Tool {
  return tool({
    description: spec.description,
    inputSchema: jsonSchema<Record<string, unknown>>(spec.inputSchema as JSONSchema7, {
      // Full validation is the kernel's (zod); here only: arguments must be an object.
      validate: (value) =>
        typeof value === "object" && value !== null && !Array.isArray(value)
          ? { success: true, value: value as Record<string, unknown> }
          : { success: false, error: new Error("arguments must be a JSON object") },
    }),
  });
}

function toModelMessages(messages: EngineMessage[]): ModelMessage[] {
  const out: ModelMessage[] = [];
  for (const m of messages) {
    if (m.role === "user") {
      out.push({ role: "user", content: m.text });
    } else if (m.role === "assistant") {
      const content: Exclude<AssistantModelMessage["content"], string> = [];
      if (m.text !== "") content.push({ type: "text", text: m.text });
      for (const c of m.toolCalls ?? []) {
        content.push({
          type: "tool-call",
          toolCallId: c.callId,
          toolName: wireToolName(c.tool),
          input: c.input,
        });
      }
      if (content.length > 0) out.push({ role: "assistant", content });
    } else {
      const part = {
        type: "tool-result" as const,
        toolCallId: m.callId,
        toolName: wireToolName(m.tool),
        output:
          m.error !== undefined
            ? { type: "error-text" as const, value: `${m.error.code}: ${m.error.message}` }
            : typeof m.output === "string"
              ? { type: "text" as const, value: m.output }
              : { type: "json" as const, value: (m.output ?? null) as JSONValue },
      };
      const last = out.at(-1);
      if (last?.role === "tool") last.content.push(part);
      else out.push({ role: "tool", content: [part] });
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// One attempt: stream the step, map the SDK's parts to engine events.

type Outcome =
  | { ok: true }
  | { ok: false; error: EngineError; emitted: boolean; retryAfterMs: number | undefined };

async function* attemptStep(
  cfg: { model: EngineModel; idleTimeoutMs: number },
  req: EngineRequest,
  p: Prepared,
  signal: AbortSignal,
): AsyncGenerator<EngineEvent, Outcome> {
  const ac = new AbortController();
  const onAbort = () => ac.abort(signal.reason);
  signal.addEventListener("abort", onAbort, { once: true });
  let timedOut = false;
  let idle: ReturnType<typeof setTimeout> | undefined;
  const resetIdle = () => {
    clearTimeout(idle);
    idle = setTimeout(() => {
      timedOut = true;
      ac.abort(new Error("idle timeout"));
    }, cfg.idleTimeoutMs);
  };
  let emitted = false;
  let completed = false;
  const fail = (err: unknown): Outcome => {
    const c = timedOut
      ? {
          error: {
            code: "EMODEL_TIMEOUT" as const,
            message: `no data from the model for ${cfg.idleTimeoutMs} ms`,
            retryable: true,
          },
          retryAfterMs: undefined,
        }
      : signal.aborted
        ? { error: aborted(), retryAfterMs: undefined }
        : classify(err);
    return { ok: false, emitted, ...c };
  };

  try {
    resetIdle();
    const result = streamText({
      model: cfg.model,
      instructions: req.system,
      messages: p.messages,
      tools: p.tools,
      ...(req.maxOutputTokens === undefined ? {} : { maxOutputTokens: req.maxOutputTokens }),
      maxRetries: 0, // retries are ours: only before anything was yielded
      abortSignal: ac.signal,
      onError: () => {}, // errors arrive as stream parts; the default handler logs them
    });
    const reported = new Set<string>();
    let finish: { reason: string; input: number; output: number; model: string } | undefined;

    for await (const part of result.stream) {
      resetIdle();
      switch (part.type) {
        case "text-delta":
          if (part.text !== "") {
            emitted = true;
            yield { type: "text-delta", text: part.text };
          }
          break;
        case "tool-call": {
          const tool = p.fromWire.get(part.toolName) ?? part.toolName;
          emitted = true;
          if (part.invalid === true) {
            reported.add(part.toolCallId);
            yield toolCallError(part, tool, part.error, p.fromWire);
          } else {
            yield { type: "tool-call", callId: part.toolCallId, tool, input: part.input };
          }
          break;
        }
        case "tool-error": // follows an invalid tool-call, already reported
          if (!reported.has(part.toolCallId)) {
            reported.add(part.toolCallId);
            emitted = true;
            const tool = p.fromWire.get(part.toolName) ?? part.toolName;
            yield toolCallError(part, tool, part.error, p.fromWire);
          }
          break;
        case "finish-step":
          finish = {
            reason: part.finishReason,
            input: part.usage.inputTokens ?? 0,
            output: part.usage.outputTokens ?? 0,
            model: part.response.modelId,
          };
          break;
        case "error":
          return fail(part.error);
        case "abort":
          return fail(new Error(part.reason ?? "aborted"));
        default:
          break; // start, text-start/end, tool-input-*, reasoning, sources, finish…
      }
    }
    if (timedOut || signal.aborted) return fail(new Error("aborted"));
    if (finish === undefined || finish.reason === "interrupted" || finish.reason === "error") {
      // The stream ended without the provider's completion signal: output may be cut.
      return {
        ok: false,
        emitted,
        retryAfterMs: undefined,
        error: {
          code: "EMODEL_UNAVAILABLE",
          message: "the model's response stream ended before it completed",
          retryable: true,
        },
      };
    }
    completed = true;
    yield {
      type: "finish",
      reason: mapFinishReason(finish.reason),
      usage: { inputTokens: finish.input, outputTokens: finish.output },
      ...(finish.model === "" ? {} : { model: finish.model }),
    };
    return { ok: true };
  } catch (err) {
    return fail(err);
  } finally {
    clearTimeout(idle);
    signal.removeEventListener("abort", onAbort);
    if (!completed) ac.abort(new Error("engine step ended")); // release the connection
  }
}

function mapFinishReason(r: string): "stop" | "tool-calls" | "length" | "other" {
  return r === "stop" || r === "tool-calls" || r === "length" ? r : "other";
}

/**
 * A call that cannot be routed. The message is for the model, so it names tools as the
 * model knows them (wire names); `tool` is the agentd name when there is one.
 */
function toolCallError(
  part: { toolCallId: string; toolName: string; input: unknown },
  tool: string,
  cause: unknown,
  fromWire: Map<string, string>,
): EngineEvent {
  const base = {
    type: "tool-call-error" as const,
    callId: part.toolCallId,
    tool,
    input: part.input,
  };
  if (NoSuchToolError.isInstance(cause) || !fromWire.has(part.toolName)) {
    const known = [...fromWire.keys()].join(", ") || "none";
    return {
      ...base,
      error: {
        code: "EUNKNOWN_TOOL",
        message: `unknown tool ${JSON.stringify(part.toolName)}; available tools: ${known}`,
      },
    };
  }
  const why = InvalidToolInputError.isInstance(cause)
    ? JSONParseError.isInstance(cause.cause)
      ? "are not valid JSON"
      : "must be a JSON object"
    : "were rejected";
  return {
    ...base,
    error: { code: "EBAD_TOOL_INPUT", message: `the arguments of ${part.toolName} ${why}` },
  };
}

// ---------------------------------------------------------------------------------------
// Errors and retries.

function aborted(): EngineError {
  return { code: "EABORTED", message: "the model step was aborted", retryable: false };
}

const MAX_MESSAGE = 1000;

function short(s: string): string {
  return s.length > MAX_MESSAGE ? `${s.slice(0, MAX_MESSAGE)}…` : s;
}

/** Maps what the SDK throws (or streams) to an engine error, by the SDK's own classes. */
export function classify(err: unknown): { error: EngineError; retryAfterMs: number | undefined } {
  const msg = short(err instanceof Error ? err.message : String(err));
  const e = (code: EngineError["code"], retryable: boolean, message = msg) => ({
    error: { code, message, retryable },
    retryAfterMs: undefined as number | undefined,
  });
  if (err instanceof BadRequest) return e("EMODEL_BAD_REQUEST", false);
  if (APICallError.isInstance(err) || StreamProviderError.isInstance(err)) {
    const status = err.statusCode;
    const withStatus = status === undefined ? msg : `HTTP ${status}: ${msg}`;
    if (status === 401 || status === 403) return e("EMODEL_AUTH", false, withStatus);
    const retryAfterMs = APICallError.isInstance(err) ? retryAfter(err.responseHeaders) : undefined;
    if (status === 429) return { ...e("EMODEL_RATE_LIMIT", true, withStatus), retryAfterMs };
    if (err.isRetryable) return { ...e("EMODEL_UNAVAILABLE", true, withStatus), retryAfterMs };
    if (status !== undefined && status >= 400 && status < 500) {
      return e("EMODEL_BAD_REQUEST", false, withStatus);
    }
    return e("EMODEL_BAD_RESPONSE", false, withStatus);
  }
  if (LoadAPIKeyError.isInstance(err)) return e("EMODEL_AUTH", false);
  if (InvalidPromptError.isInstance(err) || MissingToolResultsError.isInstance(err)) {
    return e("EMODEL_BAD_REQUEST", false);
  }
  if (
    JSONParseError.isInstance(err) ||
    TypeValidationError.isInstance(err) ||
    InvalidResponseDataError.isInstance(err)
  ) {
    return e("EMODEL_BAD_RESPONSE", false);
  }
  return e("EENGINE_INTERNAL", false);
}

/** retry-after-ms / retry-after (seconds or an HTTP date), when present and sane. */
function retryAfter(headers: Record<string, string> | undefined): number | undefined {
  if (headers === undefined) return undefined;
  const ms = Number.parseFloat(headers["retry-after-ms"] ?? "");
  if (Number.isFinite(ms) && ms >= 0) return ms;
  const raw = headers["retry-after"];
  if (raw === undefined) return undefined;
  const secs = Number.parseFloat(raw);
  if (Number.isFinite(secs) && secs >= 0) return secs * 1000;
  const at = Date.parse(raw);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

function backoff(
  cfg: { retryBaseMs: number; maxRetryDelayMs: number; random: () => number },
  attempt: number,
  retryAfterMs: number | undefined,
): number {
  const exp = cfg.retryBaseMs * 2 ** attempt;
  const jittered = exp + Math.floor(cfg.random() * exp * 0.5);
  return Math.min(cfg.maxRetryDelayMs, Math.max(jittered, retryAfterMs ?? 0));
}
