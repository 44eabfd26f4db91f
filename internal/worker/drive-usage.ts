/**
 * A run's usage and its limits: the usage so far (tokens, cost) as `usage.updated` after
 * every model step — GetRun shows it live, a cancelled run and the next drive keep it — and
 * the checks before each step: the worker's limits, tightened by the run's own budget
 * (RunBudget of CreateRun; the server bounded it by its maxima), and the cap on each
 * model request's output that keeps a step inside what is left. Every count comes from
 * the log (run-counts.ts): a resume or a takeover restarts none. Time paused for a person
 * does not count. A cost budget on a model the price table does not know cannot be kept
 * (its cost would count 0): such a run ends before its first model step. Must never: let a
 * step start past a limit, ask the model for more output than the budget has left, ask a
 * model without a price under a cost budget, or count a pause as time.
 */
import { create } from "@bufbuild/protobuf";
import { costMicros, priceFor } from "../engine/pricing.ts";
import { UsageUpdatedSchema } from "../gen/agentd/v1/events_pb.js";
import type { ReviewBudget } from "../kernel/kernel.ts";
import type { Drive } from "./drive.ts";
import { addTenantDay, tenantDaySpent } from "./drive-tenant-day.ts";
import { wallUsedMs } from "./run-counts.ts";
import type { Next } from "./run-driver.ts";

export const usageOf = (d: Drive) => ({
  inputTokens: BigInt(d.usage.inputTokens),
  outputTokens: BigInt(d.usage.outputTokens),
});

export const costOf = (d: Drive): number => costMicros(d.deps.model, d.usage, d.deps.prices).micros;

/** The run's usage so far, as an event (after a model step that reported usage). */
export async function recordUsage(d: Drive): Promise<void> {
  await d.writer.append({
    case: "usageUpdated",
    value: create(UsageUpdatedSchema, {
      usage: usageOf(d),
      costMicros: BigInt(costOf(d)),
      steps: d.steps,
    }),
  });
}

/** The smaller of the worker's limit and the run's own (0: none of its own). */
const tighter = (worker: number, own: bigint | undefined): number =>
  own === undefined || own === 0n ? worker : Math.min(worker, Number(own));

const own = (what: bigint | undefined) =>
  what !== undefined && what > 0n ? "the run's budget: " : "";

/** The run's wall-clock limit, ms: the worker's, tightened by the run's budget. */
export const wallLimitMs = (d: Drive): number =>
  tighter(d.deps.limits.maxWallMs, d.run0.budget?.maxWallMs);

/** Wall-clock ms the run has left (all drives, paused stretches not counted). */
export function wallLeftMs(d: Drive): number {
  const now = d.deps.now ?? Date.now;
  return wallLimitMs(d) - wallUsedMs(d.events, now());
}

/** The run ran out of wall-clock time (ELIMIT_TIME). */
export function wallSpent(d: Drive): Next {
  return {
    to: "fail",
    code: "ELIMIT_TIME",
    message: `${own(d.run0.budget?.maxWallMs)}the run used its ${wallLimitMs(d)} ms of wall-clock time`,
  };
}

/**
 * A failure when the run has a cost budget and its model has no price in the worker's
 * table (priceFor: an exact name or the name less a date suffix; a fine-tune `ft:BASE:…` is
 * not priced as its base — it costs more): its cost would count 0 and the budget never bind.
 */
export function unpricedCostBudget(d: Drive): Next | undefined {
  const maxCost = d.run0.budget?.maxCostMicros ?? 0n;
  if (maxCost <= 0n || priceFor(d.deps.model, d.deps.prices).known) return undefined;
  const model = JSON.stringify(d.deps.model);
  const ft = d.deps.model.startsWith("ft:") ? " (a fine-tune is not priced as its base model)" : "";
  return {
    to: "fail",
    code: "ELIMIT_COST",
    message: `the run's budget: budget.max_cost_micros cannot be enforced for model ${model}: it has no price in the worker's price table${ft}; give it one with --price-table FILE (AGENTD_PRICE_TABLE; {${model}: {inputPerMTok, outputPerMTok}} in micro-USD per million tokens) or run without a cost budget: the model was not asked`,
  };
}

/** A failure when the run reached a limit: steps, tokens, cost or wall-clock time. */
export function overLimit(d: Drive): Next | undefined {
  const { limits } = d.deps;
  const budget = d.run0.budget;
  const unpriced = unpricedCostBudget(d);
  if (unpriced !== undefined) return unpriced;
  if (d.steps >= limits.maxSteps)
    return {
      to: "fail",
      code: "ELIMIT_STEPS",
      message: `the run used its ${limits.maxSteps} model steps`,
    };
  const maxTokens = tighter(limits.maxTokens, budget?.maxTokens);
  const tokens = d.usage.inputTokens + d.usage.outputTokens;
  if (tokens >= maxTokens)
    return {
      to: "fail",
      code: "ELIMIT_TOKENS",
      message: `${own(budget?.maxTokens)}the run used ${tokens} of its ${maxTokens} tokens`,
    };
  const maxCost = budget?.maxCostMicros ?? 0n;
  if (maxCost > 0n && costOf(d) >= Number(maxCost))
    return {
      to: "fail",
      code: "ELIMIT_COST",
      message: `the run's budget: the run cost ${costOf(d)} of its ${maxCost} micro-USD`,
    };
  if (wallLeftMs(d) <= 0) return wallSpent(d);
  return undefined;
}

/**
 * The least output a step is asked with (RunLimits.minOutputTokens): a step for which less
 * would be left is not asked — it could not even finish a tool call.
 */
export const DEFAULT_MIN_OUTPUT_TOKENS = 32;

/**
 * The largest `maxOutputTokens` a step the model is asked now may have: what is left of
 * the token budget and of the cost budget (at the model's output price), after the prompt
 * (`promptTokens`: the whole request's estimate, drive-step.ts — never less than the last
 * step's reported input, run-counts.ts). A failure when less than the minimum output would
 * be left: the model is not asked. `undefined` cap: nothing to cap (no limit below the
 * ceiling).
 *
 * Values at or above `ceiling` are not sent (a provider refuses a max above its model's own
 * output limit): the model's own limit binds them.
 */
export function outputAllowance(
  d: Drive,
  promptTokens: number,
  ceiling: number,
): { cap: number | undefined } | { next: Next } {
  const budget = d.run0.budget;
  const least = d.deps.limits.minOutputTokens ?? DEFAULT_MIN_OUTPUT_TOKENS;
  const maxTokens = tighter(d.deps.limits.maxTokens, budget?.maxTokens);
  const used = d.usage.inputTokens + d.usage.outputTokens;
  const byTokens = maxTokens - used - promptTokens;
  if (byTokens < least)
    return {
      next: {
        to: "fail",
        code: "ELIMIT_TOKENS",
        message: `${own(budget?.maxTokens)}the run used ${used} of its ${maxTokens} tokens and the next prompt is estimated at ${promptTokens}, leaving less than ${least} for the answer: the model was not asked`,
      },
    };
  let cap = byTokens;
  const maxCost = Number(budget?.maxCostMicros ?? 0n);
  const price = priceFor(d.deps.model, d.deps.prices);
  if (maxCost > 0 && price.outputPerMTok > 0) {
    const prompt = costMicros(
      d.deps.model,
      { inputTokens: promptTokens, outputTokens: 0 },
      d.deps.prices,
    );
    const left = maxCost - costOf(d) - prompt.micros;
    // Whole tokens whose price fits in what is left (rounded down: never over).
    const byCost = Math.floor((left * 1_000_000) / price.outputPerMTok);
    if (byCost < least)
      return {
        next: {
          to: "fail",
          code: "ELIMIT_COST",
          message: `the run's budget: the run cost ${costOf(d)} of its ${maxCost} micro-USD and the next prompt is estimated to cost ${prompt.micros}, leaving less than ${least} output tokens: the model was not asked`,
        },
      };
    cap = Math.min(cap, byCost);
  }
  // Never without a maximum: above the ceiling a model's own limit can be far past what
  // the budget has left (32k to 128k output tokens).
  return { cap: Math.min(cap, ceiling) };
}

/**
 * The model reviewer's share of the run's budget (KernelRun.reviewBudget): a review may ask
 * for what a step could (outputAllowance, its prompt estimated by the caller; the agent
 * model's prices), or is not asked when nothing is left; what the provider reports for
 * it counts in the run's usage like a step's, recorded at once (usage.updated), so the
 * next check ends the run at its budget.
 */
export function reviewBudget(d: Drive): ReviewBudget {
  return {
    allowance: async (promptTokens) => {
      const day = await tenantDaySpent(d);
      if (day !== undefined && "message" in day) return day.message;
      const a = outputAllowance(d, promptTokens, Number.MAX_SAFE_INTEGER);
      if (!("next" in a)) return a.cap;
      const n = a.next;
      return "message" in n ? n.message : "the run has no budget left for it";
    },
    spent: async (reported, estimate) => {
      const tokensBefore = d.usage.inputTokens + d.usage.outputTokens;
      const costBefore = costOf(d);
      d.usage.inputTokens += reported.inputTokens > 0 ? reported.inputTokens : estimate.inputTokens;
      d.usage.outputTokens +=
        reported.outputTokens > 0 ? reported.outputTokens : estimate.outputTokens;
      await recordUsage(d);
      await addTenantDay(
        d,
        d.usage.inputTokens + d.usage.outputTokens - tokensBefore,
        costOf(d) - costBefore,
      );
    },
  };
}
