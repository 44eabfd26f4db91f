/**
 * The tenant's daily limits in the run loop: before each model request, a run whose
 * tenant spent its day (tokensPerDay, costPerDayUsd; every worker's runs counted) fails
 * with the per-run budgets' codes and a message naming the tenant limit; after each model
 * step, what the step used is added to the tenant's day. Must never: ask the model for a
 * tenant whose day is spent, or add a step's use twice.
 */
import { daySpent, utcDay } from "../tenancy/day-usage.ts";
import type { Drive } from "./drive.ts";
import type { Next } from "./run-driver.ts";

/** A failure when the run's tenant has spent its day; undefined without a ledger. */
export async function tenantDaySpent(d: Drive): Promise<Next | undefined> {
  const ledger = d.deps.tenantDay;
  if (ledger === undefined) return undefined;
  const tenant = d.run0.tenantId;
  const limits = await ledger.limitsOf(tenant);
  if (limits.tokensPerDay === undefined && limits.costPerDayMicros === undefined) return undefined;
  const now = (d.deps.now ?? Date.now)();
  const spent = daySpent(tenant, limits, await ledger.useOf(tenant, utcDay(now)));
  if (spent === undefined) return undefined;
  return { to: "fail", code: spent.code, message: `${spent.message}: the model was not asked` };
}

/** Adds one step's use (the difference of the run's counts around it) to the tenant's day. */
export async function addTenantDay(d: Drive, tokens: number, costMicros: number): Promise<void> {
  const ledger = d.deps.tenantDay;
  if (ledger === undefined || (tokens <= 0 && costMicros <= 0)) return;
  const now = (d.deps.now ?? Date.now)();
  await ledger.add(d.run0.tenantId, utcDay(now), { tokens, costMicros });
}
