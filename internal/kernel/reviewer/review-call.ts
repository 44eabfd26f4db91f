/**
 * Asks the model reviewer about one call and turns its answer into the verdict that takes
 * effect. The model's word is bounded on every side: no model, a timeout, an error, an
 * unparseable answer or a confidence below `minConfidence` is "ask" (a person decides);
 * an allow for a call with a `personFor` fact, or whose preview was too long to be sent
 * whole, is "ask" too. Both the model's answer and
 * what took effect are returned (reviewer.verdict records both). Must never throw (every
 * failure is an ask), never wait past the timeout even for a model that ignores the abort
 * signal, and never let the model's text change anything but the verdict.
 */
import { generateText, type LanguageModel } from "ai";
import type { PreviewData, ReviewBudget } from "../kernel.ts";
import { buildReviewerPrompt } from "./reviewer-prompt.ts";
import type { PersonFact, ReviewerConfig } from "./reviewer-schema.ts";
import { type ModelVerdict, parseVerdict } from "./reviewer-verdict.ts";

export type Verdict = "allow" | "deny" | "ask";

export interface ReviewOutcome {
  /** What takes effect. */
  verdict: Verdict;
  /** What the model answered ("" when nothing usable came back). */
  modelVerdict: Verdict | "";
  /** The model's reasoning (unredacted: the caller redacts and clips it). */
  reasoning: string;
  confidence: number;
  model: string;
  promptDigest: string;
  /** Why `verdict` differs from `modelVerdict` ("" when it does not). */
  note: string;
}

export interface ReviewRequest {
  /** The reviewer model; undefined when none is configured (every review asks). */
  model: LanguageModel | undefined;
  config: ReviewerConfig;
  goal: string;
  tool: string;
  /** The preview, already redacted. */
  preview: PreviewData;
  /** The call's personFor facts (person-facts.ts). */
  personFacts: readonly PersonFact[];
  /** The run's budget for the review (KernelRun.reviewBudget); absent: none binds. */
  budget?: ReviewBudget;
  /** The call's signal: the run's wall budget, a cancel or a halt cut the review short. */
  signal?: AbortSignal;
}

/** Most output a review is asked for: a verdict is one small JSON object. */
export const MAX_REVIEW_OUTPUT = 1024;

export async function reviewCall(r: ReviewRequest): Promise<ReviewOutcome> {
  const prompt = buildReviewerPrompt({
    rubric: r.config.rubric ?? "",
    goal: r.goal,
    tool: r.tool,
    preview: r.preview,
  });
  const base = {
    model: r.config.model ?? "",
    promptDigest: prompt.digest,
    reasoning: "",
    confidence: 0,
  };
  if (r.model === undefined)
    return { ...base, verdict: "ask", modelVerdict: "", note: "no reviewer model is configured" };
  // About 3 characters a token: an estimate on the high side, so the budget is not passed.
  const promptTokens = Math.ceil((prompt.system.length + prompt.user.length) / 3);
  const allowance = await r.budget?.allowance(promptTokens);
  if (typeof allowance === "string")
    return {
      ...base,
      verdict: "ask",
      modelVerdict: "",
      note: `not sent to the reviewer: ${allowance}`,
    };
  const maxOutputTokens = Math.min(allowance ?? MAX_REVIEW_OUTPUT, MAX_REVIEW_OUTPUT);
  const answer = await askModel(r.model, prompt, r.config.timeout, maxOutputTokens, r.signal);
  // A request that failed or was cut short was sent: its prompt is counted all the same.
  const said = answer.kind === "text" ? Math.ceil(answer.text.length / 4) : 0;
  await r.budget?.spent(answer.usage ?? { inputTokens: 0, outputTokens: 0 }, {
    inputTokens: promptTokens,
    outputTokens: said,
  });
  if (answer.kind !== "text")
    return { ...base, verdict: "ask", modelVerdict: "", note: answer.note };
  const parsed = parseVerdict(answer.text);
  if (parsed === undefined)
    return {
      ...base,
      verdict: "ask",
      modelVerdict: "",
      reasoning: answer.text,
      note: "the reviewer's answer was not a verdict",
    };
  return {
    ...base,
    ...gate(parsed, r, prompt.previewLeftOut),
    modelVerdict: parsed.verdict,
    reasoning: parsed.reasoning,
    confidence: parsed.confidence,
  };
}

/**
 * The verdict that takes effect for a parsed answer, and why it differs. `leftOut`: the
 * preview's characters the reviewer did not see (an allow of what it did not see is not one).
 */
function gate(
  v: ModelVerdict,
  r: ReviewRequest,
  leftOut: number,
): { verdict: Verdict; note: string } {
  if (v.verdict === "ask") return { verdict: "ask", note: "" };
  if (v.confidence < r.config.minConfidence)
    return {
      verdict: "ask",
      note: `low confidence ${v.confidence} < reviewer.minConfidence ${r.config.minConfidence}`,
    };
  if (v.verdict === "allow" && r.personFacts.length > 0)
    return {
      verdict: "ask",
      note: `the policy needs a person for this call (reviewer.personFor: ${r.personFacts.join(", ")}); the reviewer's allow was not taken`,
    };
  if (v.verdict === "allow" && leftOut > 0)
    return {
      verdict: "ask",
      note: `the preview was too long for the reviewer to see whole (${leftOut} characters left out); the reviewer's allow was not taken`,
    };
  return { verdict: v.verdict, note: "" };
}

type Usage = { inputTokens: number; outputTokens: number };
type Answer =
  | { kind: "text"; text: string; usage?: Usage }
  | { kind: "failed"; note: string; usage?: Usage };

/**
 * The model's text and reported usage, or why there is none; never later than `timeoutMs`
 * nor past `signal` (the call's: the run's wall budget, a cancel), which abort the request.
 */
async function askModel(
  model: LanguageModel,
  prompt: { system: string; user: string },
  timeoutMs: number,
  maxOutputTokens: number,
  signal?: AbortSignal,
): Promise<Answer> {
  const abort = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let stop: (() => void) | undefined;
  const timedOut = new Promise<Answer>((resolve) => {
    timer = setTimeout(() => {
      abort.abort(new Error("reviewer timeout"));
      resolve({ kind: "failed", note: `the reviewer did not answer within ${timeoutMs} ms` });
    }, timeoutMs);
    stop = () => {
      abort.abort(signal?.reason);
      resolve({ kind: "failed", note: "the call was stopped while the reviewer was asked" });
    };
    if (signal?.aborted) stop();
    else signal?.addEventListener("abort", stop, { once: true });
  });
  const asked = generateText({
    model,
    system: prompt.system,
    prompt: prompt.user,
    abortSignal: abort.signal,
    maxOutputTokens,
    // One try: a retry would wait past the timeout's meaning; a person is the fallback.
    maxRetries: 0,
    temperature: 0,
  }).then(
    (res): Answer => ({ kind: "text", text: res.text, usage: usageOf(res.usage) }),
    (err: unknown): Answer =>
      abort.signal.aborted
        ? { kind: "failed", note: `the reviewer did not answer within ${timeoutMs} ms` }
        : { kind: "failed", note: `the reviewer model failed (${describe(err)})` },
  );
  try {
    return await Promise.race([asked, timedOut]);
  } finally {
    clearTimeout(timer);
    if (stop !== undefined) signal?.removeEventListener("abort", stop);
  }
}

/** What the provider reported (0 for what it did not). */
function usageOf(u: { inputTokens?: number; outputTokens?: number } | undefined): Usage {
  return { inputTokens: u?.inputTokens ?? 0, outputTokens: u?.outputTokens ?? 0 };
}

function describe(err: unknown): string {
  const text =
    err instanceof Error ? `${err.name}: ${err.message}` : "a non-error value was thrown";
  return text.slice(0, 512);
}
