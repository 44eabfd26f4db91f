/**
 * One model step of a drive: the context rebuilt from the log (compacted past its budget),
 * the run's limits checked, the model asked (its request redacted of the run's secrets),
 * its text coalesced into output.delta events, its calls handed to the kernel. Engine state
 * is never kept between steps. Must never: send a secret value to the model, or run a
 * call the kernel did not see.
 */
import { create } from "@bufbuild/protobuf";
import { context, SpanStatusCode, trace } from "@opentelemetry/api";
import { compactContext } from "../engine/compactor.ts";
import { type AssembleInput, assembleContext } from "../engine/context.ts";
import { createOutputCoalescer } from "../engine/output-coalescer.ts";
import type { EngineRequest, EngineToolCall } from "../engine/port.ts";
import { costMicros } from "../engine/pricing.ts";
import { estimateRequestTokens } from "../engine/request-tokens.ts";
import { OutputDeltaSchema, OutputMessageSchema } from "../gen/agentd/v1/events_pb.js";
import { redactMessage } from "../kernel/redact-payload.ts";
import { bounded, metrics } from "../telemetry/metrics.ts";
import { startChatSpan } from "../telemetry/run-span.ts";
import { safeCallId } from "./call-id.ts";
import { separateReusedIds, usedCallIds } from "./call-id-reuse.ts";
import type { Drive } from "./drive.ts";
import { answerMalformed, runCalls, settleOpenCalls } from "./drive-calls.ts";
import { noteNetworkDecisions } from "./drive-egress.ts";
import { addTenantDay, tenantDaySpent } from "./drive-tenant-day.ts";
import {
  costOf,
  outputAllowance,
  overLimit,
  recordUsage,
  wallLeftMs,
  wallSpent,
} from "./drive-usage.ts";
import { lastPromptTokens } from "./run-counts.ts";
import type { DriveContext, Next } from "./run-driver.ts";

/**
 * What is left above this is not sent as the request's maximum output: OpenAI refuses a
 * max_tokens above the model's own output limit (16,384 for gpt-4o and gpt-4o-mini, the
 * smallest of the priced models), so there the model's own limit binds instead.
 */
const DEFAULT_OUTPUT_CEILING = 16_384;

/**
 * The estimate of a prompt is taken this much larger: what a step adds (tool calls, JSON
 * tool results) is cut finer by a tokenizer than the prompt it was scaled on, and a budget
 * must end a step early rather than let one pass it.
 */
const PROMPT_MARGIN = 1.1;

/** The calls left open, then (if none) one model step. */
export async function step(d: Drive, ctx: DriveContext): Promise<Next> {
  if (d.cancel.signal.aborted) return { to: "cancel" };
  if (d.stop.aborted) return { to: "release" };
  await d.refresh();
  await noteNetworkDecisions(d);
  const input = assembleInput(d, ctx);
  let assembled = assembleContext(input);
  if (assembled.pending.length > 0) return settleOpenCalls(d, assembled.pending);
  if (assembled.overBudget) {
    const c = await compactContext({ ...input, artifacts: d.deps.artifacts });
    if (c === undefined)
      return {
        to: "fail",
        code: "ECONTEXT_OVERFLOW",
        message: "the context does not fit the budget even after compaction",
      };
    await d.writer.append(c.payload);
    await d.refresh();
    assembled = assembleContext(assembleInput(d, ctx));
  }
  const limit = overLimit(d) ?? (await tenantDaySpent(d));
  if (limit !== undefined) return limit;
  const prompt: EngineRequest = {
    system: assembled.system,
    messages: assembled.messages,
    tools: ctx.tools,
  };
  // The whole request is what the provider charges: a prompt grown past what is left of
  // the budget (a large tool output, the first step's system prompt and tools) is never sent.
  const estimate = estimateRequestTokens(prompt);
  const allowance = outputAllowance(
    d,
    Math.max(Math.ceil(estimate * d.promptScale * PROMPT_MARGIN), lastPromptTokens(d.events) ?? 0),
    d.deps.limits.maxOutputTokensSent ?? DEFAULT_OUTPUT_CEILING,
  );
  if ("next" in allowance) return allowance.next;
  d.steps++;
  const request: EngineRequest =
    allowance.cap === undefined ? prompt : { ...prompt, maxOutputTokens: allowance.cap };
  const inputBefore = d.usage.inputTokens;
  const tokensBefore = d.usage.inputTokens + d.usage.outputTokens;
  const costBefore = costOf(d);
  const answer = await askModel(d, request);
  if ("next" in answer) return answer.next;
  // The provider's count of this prompt over the estimate: the next estimate is scaled by
  // it (text its tokenizer cuts finer than the estimate's 4 bytes a token).
  const reported = d.usage.inputTokens - inputBefore;
  if (reported > 0 && estimate > 0) d.promptScale = Math.max(1, reported / estimate);
  await recordUsage(d);
  await addTenantDay(
    d,
    d.usage.inputTokens + d.usage.outputTokens - tokensBefore,
    costOf(d) - costBefore,
  );
  if (answer.text !== "")
    await d.writer.append({
      case: "outputMessage",
      value: create(OutputMessageSchema, { role: "assistant", text: answer.text }),
    });
  // A call under an id the log already holds would be taken for that earlier call.
  const { calls, bad } = separateReusedIds(usedCallIds(d.events), answer.calls, answer.bad);
  await answerMalformed(d, bad);
  if (calls.length === 0 && bad.length === 0) return { to: "complete", summary: answer.text };
  return (await runCalls(d, calls)) ?? { to: "step" };
}

function assembleInput(d: Drive, ctx: DriveContext): AssembleInput {
  return {
    events: d.events,
    systemPrompt: d.deps.systemPrompt,
    skills: ctx.skills,
    ...(ctx.memory === undefined ? {} : { memory: ctx.memory }),
    budgetTokens: d.deps.limits.contextBudgetTokens,
  };
}

interface Answer {
  text: string;
  calls: EngineToolCall[];
  bad: { callId: string; tool: string; input: unknown; error: { code: string; message: string } }[];
}

/**
 * One engine invocation in its `chat` span, counted in the model metrics (steps, tokens,
 * cost by model).
 */
async function askModel(d: Drive, request: EngineRequest): Promise<Answer | { next: Next }> {
  const model = bounded("model", d.deps.model);
  const span = startChatSpan(d.deps.model);
  const before = { ...d.usage };
  let answer: Answer | { next: Next } | undefined;
  try {
    answer = await context.with(trace.setSpan(context.active(), span), () => stream(d, request));
    return answer;
  } finally {
    const used = {
      inputTokens: d.usage.inputTokens - before.inputTokens,
      outputTokens: d.usage.outputTokens - before.outputTokens,
    };
    const ok = answer !== undefined && !("next" in answer);
    metrics.modelSteps.inc({ model, outcome: ok ? "ok" : "error" });
    metrics.modelTokens.inc({ model, direction: "input" }, used.inputTokens);
    metrics.modelTokens.inc({ model, direction: "output" }, used.outputTokens);
    metrics.modelCost.inc({ model }, costMicros(d.deps.model, used, d.deps.prices).micros / 1e6);
    span.setAttributes({
      "gen_ai.usage.input_tokens": used.inputTokens,
      "gen_ai.usage.output_tokens": used.outputTokens,
      "gen_ai.response.finish_reasons": [finishReason(answer)],
    });
    if (!ok) span.setStatus({ code: SpanStatusCode.ERROR, message: finishReason(answer) });
    span.end();
  }
}

function finishReason(answer: Answer | { next: Next } | undefined): string {
  if (answer === undefined) return "error";
  if ("next" in answer) {
    const next = answer.next;
    return "code" in next ? String(next.code) : "to" in next ? next.to : "done";
  }
  return answer.calls.length > 0 || answer.bad.length > 0 ? "tool_calls" : "stop";
}

/** The model's answer as it streams; text is coalesced into output.delta events. */
async function stream(d: Drive, request: EngineRequest): Promise<Answer | { next: Next }> {
  // The context is built from redacted events, but skills and the memory file come from
  // the workspace: the whole request is redacted of the run's secret values.
  const safe = d.writer.secrets.any() ? redactMessage(request, d.writer.secrets.redactor) : request;
  const answer: Answer = { text: "", calls: [], bad: [] };
  let chain: Promise<unknown> = Promise.resolve();
  const coalescer = createOutputCoalescer({
    emit: (t) => {
      chain = chain.then(() =>
        d.writer.append({ case: "outputDelta", value: create(OutputDeltaSchema, { text: t }) }),
      );
    },
  });
  let finished = false;
  let reported = { inputTokens: 0, outputTokens: 0 };
  try {
    // A model step is cut at the run's wall budget too, as a tool call is.
    const wall = AbortSignal.timeout(Math.max(1, wallLeftMs(d)));
    const signal = AbortSignal.any([d.cancel.signal, wall]);
    for await (const ev of d.deps.engine.run(safe, signal)) {
      if (ev.type === "text-delta") {
        answer.text += ev.text;
        coalescer.push(ev.text);
      } else if (ev.type === "tool-call")
        answer.calls.push({ callId: safeCallId(ev.callId), tool: ev.tool, input: ev.input });
      else if (ev.type === "tool-call-error")
        answer.bad.push({ ...ev, callId: safeCallId(ev.callId) });
      else if (ev.type === "finish") {
        reported = ev.usage;
        finished = true;
      } else if (ev.type === "error") {
        if (ev.error.code === "EABORTED" && d.cancel.signal.aborted)
          return { next: { to: "cancel" } };
        if (ev.error.code === "EABORTED" && wall.aborted) return { next: wallSpent(d) };
        return { next: { to: "fail", code: ev.error.code, message: ev.error.message } };
      }
    }
  } finally {
    coalescer.close();
    await chain;
  }
  if (!finished)
    return {
      next: {
        to: "fail",
        code: "EMODEL_BAD_RESPONSE",
        message: "the model step ended without finishing",
      },
    };
  countStep(d, reported, safe, answer);
  return answer;
}

/**
 * Adds the step's tokens to the run's usage: as the provider reported them, or, where it
 * reported none (a provider that sends no usage), as estimated from the request and the
 * answer (4 bytes a token): a run's token budget binds whatever the provider tells.
 */
function countStep(
  d: Drive,
  reported: { inputTokens: number; outputTokens: number },
  request: EngineRequest,
  answer: Answer,
): void {
  const said = answer.text.length + JSON.stringify(answer.calls).length;
  d.usage.inputTokens +=
    reported.inputTokens > 0 ? reported.inputTokens : estimateRequestTokens(request);
  d.usage.outputTokens += reported.outputTokens > 0 ? reported.outputTokens : Math.ceil(said / 4);
}
