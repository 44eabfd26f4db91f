/**
 * The replay model: an AgentEngine that plays back a recorded transcript instead of calling
 * a language model. It is what `make demo` and the end-to-end benchmark run on a machine
 * without OPENAI_API_KEY (`agentd dev --replay FILE`, or `--model replay:FILE` anywhere).
 *
 * A transcript is a list of steps; each step is what the model said in one model step:
 * text (streamed in a few deltas with small delays, so a live view shows it arriving)
 * and/or tool calls (tool name and input), and the usage the step reports in its `finish`.
 * The engine is stateless like every engine (port.ts): each `run` looks at the request's
 * messages to find out where the conversation is, and plays the step that comes next.
 *
 * Which step: the number of assistant turns already in the messages (the worker's own
 * `setup.run` calls are not turns: no model made them). One step with
 * several tool calls becomes several assistant messages in the context the worker rebuilds
 * from events (context.ts: one message per call), so the engine names its calls
 * `replay-STEP-INDEX` and counts consecutive assistant messages of the same step as one
 * turn. A run resumed after an approval (or taken over by another worker) therefore
 * continues at the right step: nothing is remembered between calls.
 *
 * Robustness: before playing step k, every earlier turn is checked against the transcript
 * (same step, same tools, and each call's result as recorded: by default a success; a
 * step may expect an error, an exit code or substrings of the output). When the
 * conversation has left the transcript (a denied approval, a tool error the recording did
 * not have, a test that still fails, a run from another transcript, more turns than
 * recorded),
 * the engine answers with a text that says where and why, and a `finish`: the run
 * completes with that text as its summary. It never throws, never hangs (every delay obeys
 * the abort signal) and never invents a tool call that was not recorded.
 *
 * Must never: execute anything (invariant 3, like every engine), read files at step time
 * (the transcript is loaded once, up front), or depend on wall-clock state between calls.
 */

import { readFileSync } from "node:fs";
import { setTimeout as delay } from "node:timers/promises";
import { z } from "zod";
import { AgentdError } from "../errors.ts";
import { SETUP_TOOL } from "../tools/setup-run.ts";
import type {
  AgentEngine,
  EngineEvent,
  EngineMessage,
  EngineRequest,
  EngineToolCall,
  EngineUsage,
} from "./port.ts";

/** What a recorded call's result must look like for the replay to go on. */
const ExpectSchema = z
  .object({
    /** The result is a success (default true): a failed or denied call is a mismatch. */
    ok: z.boolean().default(true),
    /** The command's exit code (process.run, test.run, lint.run results). */
    exitCode: z.number().int().optional(),
    /** Substrings the output's JSON text must contain (e.g. a function name read). */
    outputIncludes: z.array(z.string().min(1)).default([]),
    /** With ok false: the error code the recording had (e.g. "EAPPROVAL_DENIED"). */
    errorCode: z.string().min(1).optional(),
  })
  .strict();

const ToolCallSchema = z
  .object({
    /** agentd tool name, e.g. "repo.read". */
    tool: z.string().min(1),
    /** The call's input, exactly as the model sent it. */
    input: z.unknown(),
    /** How its result must look; default: a success. */
    expect: ExpectSchema.default({ ok: true, outputIncludes: [] }),
  })
  .strict();

const StepSchema = z
  .object({
    /** What the model said in this step (may be empty when it only calls tools). */
    text: z.string().default(""),
    /** The calls it made, in order. None: this is the final answer. */
    toolCalls: z.array(ToolCallSchema).default([]),
    /** Usage the step reports in its finish event. */
    usage: z
      .object({
        inputTokens: z.number().int().min(0),
        outputTokens: z.number().int().min(0),
      })
      .strict(),
    /** A note for people reading the transcript; never shown to the run. */
    note: z.string().optional(),
  })
  .strict()
  .refine((s) => s.text !== "" || s.toolCalls.length > 0, {
    message: "a step needs text or tool calls",
  });

const TranscriptSchema = z
  .object({
    version: z.literal(1),
    /** The model id reported in finish events (e.g. "replay"). */
    model: z.string().min(1),
    /** What the transcript is, for people. */
    description: z.string().optional(),
    steps: z.array(StepSchema).min(1),
  })
  .strict();

export type ReplayTranscript = z.infer<typeof TranscriptSchema>;
type ReplayStep = ReplayTranscript["steps"][number];
type ReplayExpect = z.infer<typeof ExpectSchema>;

/** Validates a transcript (parsed JSON); errors name the field, e.g. "steps.2.usage". */
export function parseTranscript(value: unknown, source = "transcript"): ReplayTranscript {
  const r = TranscriptSchema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  const field = issue?.path.join(".") || "(root)";
  throw new AgentdError("EVALIDATION", `${source}: ${field}: ${issue?.message ?? "invalid"}`, {
    field,
  });
}

/** Reads and validates a transcript file. */
export function loadTranscript(path: string): ReplayTranscript {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new AgentdError("EVALIDATION", `${path}: ${(err as Error).message}`, { cause: err });
  }
  return parseTranscript(raw, path);
}

export interface ReplayEngineOptions {
  transcript: ReplayTranscript;
  /**
   * Delay before a step's first event, ms (default 250): the "thinking" time of a model,
   * so a live view does not get the whole step at once. 0 in benchmarks.
   */
  firstDelayMs?: number;
  /** Delay before each further text delta, ms (default 60). 0 in benchmarks. */
  deltaDelayMs?: number;
  /** Text deltas per step, at most (default 6); the text is split at spaces. */
  deltasPerStep?: number;
}

/** The call id of call `index` of step `step`: how the engine recognises its own turns. */
export function replayCallId(step: number, index: number): string {
  return `replay-${step}-${index}`;
}

const CALL_ID = /^replay-(\d+)-(\d+)$/;

/** One assistant turn found in the messages: a step's calls and their results. */
interface Turn {
  /** The step its call ids name; undefined for a turn the engine did not produce. */
  step: number | undefined;
  text: string;
  calls: EngineToolCall[];
  results: Map<string, Extract<EngineMessage, { role: "tool" }>>;
}

/**
 * Groups the assistant messages into turns: consecutive messages whose call ids name the
 * same step form one turn (a step with several calls); any other assistant message is a
 * turn of its own. Tool results are attached to the turn of their call.
 */
function turnsOf(messages: readonly EngineMessage[]): Turn[] {
  const turns: Turn[] = [];
  const byCall = new Map<string, Turn>();
  for (const m of messages) {
    if (m.role === "assistant") {
      const calls = m.toolCalls ?? [];
      // The worker's setup step is recorded as a call before the model's first step (and
      // again after a resume): no model made it, so it is no turn of the transcript.
      if (calls.length > 0 && calls.every((c) => c.tool === SETUP_TOOL)) continue;
      const steps = new Set(calls.map((c) => stepOfCall(c.callId)));
      // Only when all its calls name one and the same step is a message the engine's own.
      const step = steps.size === 1 ? [...steps][0] : undefined;
      const last = turns.at(-1);
      let turn: Turn;
      if (step !== undefined && last !== undefined && last.step === step) {
        turn = last;
        turn.text += m.text;
        turn.calls.push(...calls);
      } else {
        turn = { step, text: m.text, calls: [...calls], results: new Map() };
        turns.push(turn);
      }
      for (const c of calls) byCall.set(c.callId, turn);
    } else if (m.role === "tool") {
      byCall.get(m.callId)?.results.set(m.callId, m);
    }
  }
  return turns;
}

function stepOfCall(callId: string): number | undefined {
  const m = CALL_ID.exec(callId);
  return m === null ? undefined : Number(m[1]);
}

/**
 * Why `turns` are not what the transcript recorded, or undefined when they are. Checked
 * turn by turn, in order: the first difference is the one reported.
 */
function findMismatch(transcript: ReplayTranscript, turns: readonly Turn[]): string | undefined {
  for (const [i, turn] of turns.entries()) {
    const step = transcript.steps[i];
    if (step === undefined) return undefined; // past the end: reported by the caller
    // A text-only turn (a final answer) has no call id: it matches by its text.
    const sameText =
      turn.calls.length === 0 && step.toolCalls.length === 0 && turn.text === step.text;
    if (turn.step !== i && !sameText) {
      return turn.calls.length === 0
        ? `turn ${i + 1} is a message the transcript does not have`
        : `turn ${i + 1} has tool calls the replay did not make (${turn.calls.map((c) => c.callId).join(", ")})`;
    }
    const want = step.toolCalls.map((c) => c.tool);
    const got = turn.calls.map((c) => c.tool);
    if (want.join("\n") !== got.join("\n")) {
      return `step ${i + 1} made the calls [${got.join(", ")}], the transcript recorded [${want.join(", ")}]`;
    }
    for (const [j, rec] of step.toolCalls.entries()) {
      const callId = replayCallId(i, j);
      const result = turn.results.get(callId);
      if (result === undefined) return `the ${rec.tool} call of step ${i + 1} has no result`;
      const why = resultMismatch(rec.expect, result);
      if (why !== undefined) return `the ${rec.tool} call of step ${i + 1} ${why}`;
    }
  }
  return undefined;
}

/** How a result differs from what was recorded, or undefined when it matches. */
function resultMismatch(
  expect: ReplayExpect,
  result: Extract<EngineMessage, { role: "tool" }>,
): string | undefined {
  const failed = result.error !== undefined;
  if (failed && expect.ok) {
    return `failed (${result.error?.code}: ${result.error?.message}); the recording had a success`;
  }
  if (!failed && !expect.ok) return "succeeded; the recording had an error";
  if (failed) {
    if (expect.errorCode !== undefined && result.error?.code !== expect.errorCode)
      return `failed with ${result.error?.code}; the recording had ${expect.errorCode}`;
    return undefined;
  }
  // A previewed call's output is { preview, result } (kernel.ts): look at the result.
  const out = unwrapPreview(result.output);
  if (expect.exitCode !== undefined) {
    const code = (out as { exitCode?: unknown } | undefined)?.exitCode;
    if (code !== expect.exitCode)
      return `exited with ${String(code)}; the recording had exit code ${expect.exitCode}`;
  }
  const text = typeof out === "string" ? out : (JSON.stringify(out) ?? "");
  for (const s of expect.outputIncludes) {
    if (!text.includes(s)) return `returned an output without ${JSON.stringify(s)}`;
  }
  return undefined;
}

function unwrapPreview(output: unknown): unknown {
  if (output !== null && typeof output === "object" && "preview" in output && "result" in output)
    return (output as { result: unknown }).result;
  return output;
}

/** Splits `text` into at most `n` deltas at spaces (never inside a word, never empty). */
export function splitDeltas(text: string, n: number): string[] {
  if (text === "") return [];
  const words = text.match(/\S+\s*|\s+/g) ?? [text];
  const per = Math.max(1, Math.ceil(words.length / Math.max(1, n)));
  const out: string[] = [];
  for (let i = 0; i < words.length; i += per) out.push(words.slice(i, i + per).join(""));
  return out;
}

const ABORTED: EngineEvent = {
  type: "error",
  error: { code: "EABORTED", message: "the model step was aborted", retryable: false },
};

export function createReplayEngine(opts: ReplayEngineOptions): AgentEngine {
  const { transcript } = opts;
  const firstDelayMs = opts.firstDelayMs ?? 250;
  const deltaDelayMs = opts.deltaDelayMs ?? 60;
  const deltasPerStep = opts.deltasPerStep ?? 6;
  const total = transcript.steps.length;

  /** What the engine says when the conversation has left the transcript. */
  function offScript(k: number, why: string): string {
    return (
      `Replay stopped at step ${k + 1} of ${total}: ${why}. ` +
      `This run is driven by the recorded transcript "${transcript.model}", which cannot ` +
      "adapt to a different conversation, so it ends here without further changes. " +
      "Set OPENAI_API_KEY (and OPENAI_BASE_URL for another compatible server) to let a live model continue."
    );
  }

  return {
    async *run(req: EngineRequest, signal: AbortSignal): AsyncIterable<EngineEvent> {
      try {
        const turns = turnsOf(req.messages);
        const k = turns.length;
        const why =
          findMismatch(transcript, turns) ??
          (k >= total
            ? `the conversation already has ${k} model turns and the transcript recorded ${total}`
            : undefined);
        const step: ReplayStep =
          why === undefined
            ? (transcript.steps[k] as ReplayStep)
            : { text: offScript(Math.min(k, total), why), toolCalls: [], usage: ZERO_USAGE };

        if (!(await delay(firstDelayMs, true, { signal }).catch(() => false))) {
          yield ABORTED;
          return;
        }
        for (const [i, delta] of splitDeltas(step.text, deltasPerStep).entries()) {
          if (i > 0 && !(await delay(deltaDelayMs, true, { signal }).catch(() => false))) {
            yield ABORTED;
            return;
          }
          yield { type: "text-delta", text: delta };
        }
        if (signal.aborted) {
          yield ABORTED;
          return;
        }
        for (const [j, c] of step.toolCalls.entries()) {
          // A fresh copy: the worker must not share (or mutate) the transcript's objects.
          yield {
            type: "tool-call",
            callId: replayCallId(k, j),
            tool: c.tool,
            input: structuredClone(c.input),
          };
        }
        yield {
          type: "finish",
          reason: step.toolCalls.length > 0 ? "tool-calls" : "stop",
          usage: { ...step.usage },
          model: transcript.model,
        };
      } catch (err) {
        // A bug here must not crash the worker: the port wants an error event.
        yield {
          type: "error",
          error: {
            code: "EENGINE_INTERNAL",
            message: `replay engine: ${(err as Error).message}`,
            retryable: false,
          },
        };
      }
    },
  };
}

const ZERO_USAGE: EngineUsage = { inputTokens: 0, outputTokens: 0 };
