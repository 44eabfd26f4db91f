/**
 * The auth file's per-tenant concurrency limits as the queue enforces them: which number a
 * tenant gets (its own concurrentRuns, else the server's --tenant-limit) and publishing the
 * named ones to the queue (RunQueue.setTenantLimits), at start and after every reload. Must
 * never: publish a partial set (the queue replaces the whole set in one step), or read the
 * auth file itself (the caller passes what it parsed).
 */
import type { TenantConfig } from "../auth/tenant-config.ts";
import type { DayLimits } from "../tenancy/day-usage.ts";
import type { RunQueue } from "./port.ts";

export interface TenantSource {
  tenantIds(): readonly string[];
  tenantConfig(tenantId: string): TenantConfig;
}

/** A tenant's concurrency limit and where it comes from. */
export interface TenantConcurrency {
  limit: number;
  /** "tenant": the auth file's tenants.<id>.limits.concurrentRuns; "server": --tenant-limit. */
  source: "tenant" | "server";
}

/** A tenant's concurrency limit and where it comes from. */
export function tenantConcurrency(
  src: TenantSource,
  serverLimit: number,
  tenantId: string,
): TenantConcurrency {
  const own = src.tenantConfig(tenantId).limits.concurrentRuns;
  return own === undefined
    ? { limit: serverLimit, source: "server" }
    : { limit: own, source: "tenant" };
}

/** Publishes every named tenant's own concurrentRuns (tenants without one are left out). */
export async function publishTenantLimits(queue: RunQueue, src: TenantSource): Promise<void> {
  const limits = new Map<string, number>();
  for (const t of src.tenantIds()) {
    const n = src.tenantConfig(t).limits.concurrentRuns;
    if (n !== undefined) limits.set(t, n);
  }
  await queue.setTenantLimits(limits);
}

/** The auth file's daily limits of a tenant, cost in micro-USD. */
export function dayLimitsOf(cfg: TenantConfig): DayLimits {
  const { tokensPerDay, costPerDayUsd, artifactBytes } = cfg.limits;
  return {
    ...(tokensPerDay === undefined ? {} : { tokensPerDay }),
    ...(artifactBytes === undefined ? {} : { artifactBytes }),
    ...(costPerDayUsd === undefined ? {} : { costPerDayMicros: Math.round(costPerDayUsd * 1e6) }),
  };
}
