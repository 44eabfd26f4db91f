/**
 * The per-tenant limit gauges (agentd_tenant_limit and agentd_tenant_limit_used) of the
 * tenants the auth file names: every series exists from the start (capacity set, use 0) and
 * is rebuilt on each auth-file reload (a tenant removed loses its series, a new one gets
 * them at once); use is read from the shared stores at scrape time. Series per limit:
 * concurrentRuns for every named tenant (its own or the server's --tenant-limit), and
 * tokensPerDay / costPerDayUsd (USD) / artifactBytes where the tenant has them. Must never: make a series
 * for a tenant the auth file does not name (a request's tenant is not a label value), or
 * block a scrape on a store (scrape.ts bounds it).
 */

import type { RunQueue } from "../scheduler/port.ts";
import type { TenantConcurrency } from "../scheduler/tenant-limits.ts";
import type { TenantArtifactLedger } from "../tenancy/artifact-bytes.ts";
import { type DayLimits, type TenantDayLedger, utcDay } from "../tenancy/day-usage.ts";
import { metrics } from "./metrics.ts";
import { onScrape } from "./scrape.ts";

export interface TenantLimitGaugeSource {
  /** The tenants the auth file names, now. */
  tenantIds(): readonly string[];
  concurrency(tenantId: string): TenantConcurrency;
  dayLimits(tenantId: string): DayLimits;
}

/** Rebuilds every series from the source: call at start and after each reload. */
export function primeTenantLimitSeries(src: TenantLimitGaugeSource): void {
  metrics.tenantLimit.reset();
  metrics.tenantLimitUsed.reset();
  for (const tenant of src.tenantIds()) {
    const set = (limit: string, capacity: number) => {
      metrics.tenantLimit.set({ tenant, limit }, capacity);
      metrics.tenantLimitUsed.set({ tenant, limit }, 0);
    };
    set("concurrentRuns", src.concurrency(tenant).limit);
    const day = src.dayLimits(tenant);
    if (day.tokensPerDay !== undefined) set("tokensPerDay", day.tokensPerDay);
    if (day.costPerDayMicros !== undefined) set("costPerDayUsd", day.costPerDayMicros / 1e6);
    if (day.artifactBytes !== undefined) set("artifactBytes", day.artifactBytes);
  }
}

/** Reads each named tenant's use before every scrape; returns the unregister. */
export function registerTenantLimitGauges(
  src: TenantLimitGaugeSource,
  queue: RunQueue,
  ledger: TenantDayLedger,
  artifacts?: TenantArtifactLedger,
): () => void {
  return onScrape(async () => {
    const tenants = src.tenantIds();
    const used = await queue.tenantSlots(tenants);
    const today = utcDay(Date.now());
    await Promise.all(
      tenants.map(async (tenant, i) => {
        metrics.tenantLimitUsed.set({ tenant, limit: "concurrentRuns" }, used[i] ?? 0);
        const day = src.dayLimits(tenant);
        if (day.artifactBytes !== undefined && artifacts !== undefined)
          metrics.tenantLimitUsed.set(
            { tenant, limit: "artifactBytes" },
            await artifacts.bytesOf(tenant),
          );
        if (day.tokensPerDay === undefined && day.costPerDayMicros === undefined) return;
        const use = await ledger.useOf(tenant, today);
        if (day.tokensPerDay !== undefined)
          metrics.tenantLimitUsed.set({ tenant, limit: "tokensPerDay" }, use.tokens);
        if (day.costPerDayMicros !== undefined)
          metrics.tenantLimitUsed.set({ tenant, limit: "costPerDayUsd" }, use.costMicros / 1e6);
      }),
    );
  });
}
