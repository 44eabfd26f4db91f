/**
 * AgentEngine: the port between the worker's agent loop and a language model. One call of
 * `run` is ONE model step (one LLM call): the worker loops, feeding tool results back.
 *
 * The engine only proposes (invariant 3): it never touches the filesystem, the shell or
 * the network beyond its model endpoint, and never executes a tool. Tools are declared to
 * the model by name, description and JSON schema only, WITHOUT an execute function; every
 * `tool-call` event is a request the worker routes through the kernel.
 *
 * Shapes here are provider-neutral: nothing of the AI SDK leaks into this file.
 */

/** A tool call the model made, as it appears in the conversation history. */
export interface EngineToolCall {
  callId: string;
  /** The agentd tool name (e.g. "repo.read"), or the raw name for an unknown tool. */
  tool: string;
  /** The parsed arguments, or the raw string when they were not valid JSON. */
  input: unknown;
}

/** An error as the model reads it (a tool result that failed, a rejected call). */
export interface EngineErrorInfo {
  code: string;
  message: string;
}

/**
 * One message of the conversation so far (the system prompt is separate). The context
 * assembler builds these from events; the engine keeps no state between invocations.
 */
export type EngineMessage =
  | { role: "user"; text: string }
  /** What the model said in a step: its text and the tool calls it made. */
  | { role: "assistant"; text: string; toolCalls?: EngineToolCall[] }
  /**
   * The result of one tool call: `output` (any JSON value; a string is sent as is) when it
   * succeeded, `error` when it failed or was denied. Every assistant tool call must have
   * exactly one result before the next assistant message (the SDK refuses otherwise).
   */
  | { role: "tool"; callId: string; tool: string; output?: unknown; error?: EngineErrorInfo };

/** A tool declared to the model. Declaration only: the engine never runs it. */
export interface EngineToolSpec {
  /** agentd name, e.g. "repo.read" (adapters map it to what the provider accepts). */
  name: string;
  description: string;
  /** JSON schema (draft-7 object schema) of the tool's input. */
  inputSchema: Record<string, unknown>;
}

export interface EngineRequest {
  system: string;
  messages: EngineMessage[];
  tools: EngineToolSpec[];
  maxOutputTokens?: number;
}

export interface EngineUsage {
  inputTokens: number;
  outputTokens: number;
}

/** Why a tool call the model made cannot be routed: the model must be told, the run goes on. */
export type ToolCallErrorCode =
  | "EUNKNOWN_TOOL" // the model named a tool that was not declared
  | "EBAD_TOOL_INPUT"; // the arguments are not valid JSON (or not an object)

/** Errors that end an invocation. */
export type EngineErrorCode =
  | "EMODEL_AUTH" // 401/403, missing key: never retried
  | "EMODEL_RATE_LIMIT" // 429 after the bounded retries
  | "EMODEL_UNAVAILABLE" // network error, 5xx, 408, a stream cut short: after the retries
  | "EMODEL_TIMEOUT" // no data from the model for the idle timeout: after the retries
  | "EMODEL_BAD_REQUEST" // other 4xx, an invalid conversation (e.g. a call without result)
  | "EMODEL_BAD_RESPONSE" // the provider answered something we cannot parse
  | "EABORTED" // the caller's signal fired
  | "EENGINE_INTERNAL"; // anything else (a bug): the message says what

export interface EngineError {
  code: EngineErrorCode;
  message: string;
  /** True when the same step may succeed if tried again later (transient cause). */
  retryable: boolean;
}

/**
 * What an invocation yields, in order. Contract:
 * - exactly one terminal event, `finish` or `error`, and it is the last one;
 * - `tool-call` events carry complete, parsed arguments; the worker acts on them only
 *   after `finish` (a step that ends in `error` is discarded: its calls are not run);
 * - `tool-call-error` reports a call that cannot be routed (unknown tool, malformed
 *   arguments): the worker records it and answers the model with the error as that
 *   call's result; the run does not crash;
 * - internal retries of transient failures happen only before anything was yielded, so
 *   text is never duplicated.
 */
export type EngineEvent =
  | { type: "text-delta"; text: string }
  | { type: "tool-call"; callId: string; tool: string; input: unknown }
  | {
      type: "tool-call-error";
      callId: string;
      tool: string;
      /** What the model sent: parsed JSON when possible, else the raw string. */
      input: unknown;
      error: { code: ToolCallErrorCode; message: string };
    }
  | {
      type: "finish";
      reason: "stop" | "tool-calls" | "length" | "other";
      usage: EngineUsage;
      /** The model id the provider reported, when it did. */
      model?: string;
    }
  | { type: "error"; error: EngineError };

export interface AgentEngine {
  /** One model step. Aborting `signal` ends it promptly with an `EABORTED` error event. */
  run(req: EngineRequest, signal: AbortSignal): AsyncIterable<EngineEvent>;
}
