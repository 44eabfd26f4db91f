/**
 * A run's usage and its limits: the usage so far (tokens, cost) as `usage.updated` after
 * every model step — GetRun shows it live, a cancelled run and the next drive keep it — and
 * the checks before each step: the worker's limits, tightened by the run's own budget
 * (RunBudget of CreateRun; the server bounded it by its maxima). Time held for a person
 * does not count. Must never: let a step start past a limit, or count a pause as time.
 */
import { create } from "@bufbuild/protobuf";
import { costMicros } from "../engine/pricing.ts";
import { UsageUpdatedSchema } from "../gen/agentd/v1/events_pb.js";
import type { Drive } from "./drive.ts";
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

/** A failure when the run reached a limit: steps, tokens, cost or wall-clock time. */
export function overLimit(d: Drive): Next | undefined {
  const { limits } = d.deps;
  const budget = d.run0.budget;
  const now = d.deps.now ?? Date.now;
  const own = (what: bigint | undefined) =>
    what !== undefined && what > 0n ? "the run's budget: " : "";
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
  const maxWallMs = tighter(limits.maxWallMs, budget?.maxWallMs);
  if (now() - d.startedAt - d.heldMs >= maxWallMs)
    return {
      to: "fail",
      code: "ELIMIT_TIME",
      message: `${own(budget?.maxWallMs)}the run used its ${maxWallMs} ms of wall-clock time`,
    };
  return undefined;
}
