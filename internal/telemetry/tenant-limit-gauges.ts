/**
 * The per-tenant limit gauges (agentd_tenant_limit and agentd_tenant_limit_used) of the
 * tenants the auth file names: every series exists from the start (capacity set, use 0) and
 * is rebuilt on each auth-file reload (a tenant removed loses its series, a new one gets
 * them at once); use is read from the queue at scrape time. Must never: make a series for a
 * tenant the auth file does not name (a request's tenant is not a label value), or block a
 * scrape on the queue (scrape.ts bounds it).
 */

import type { RunQueue } from "../scheduler/port.ts";
import type { TenantConcurrency } from "../scheduler/tenant-limits.ts";
import { metrics } from "./metrics.ts";
import { onScrape } from "./scrape.ts";

/** The limits agentd enforces today, as the `limit` label says them. */
export const ENFORCED_LIMITS = ["concurrentRuns"] as const;

export interface TenantLimitGaugeSource {
  /** The tenants the auth file names, now. */
  tenantIds(): string[];
  concurrency(tenantId: string): TenantConcurrency;
}

/** Rebuilds every series from the source: call at start and after each reload. */
export function primeTenantLimitSeries(src: TenantLimitGaugeSource): void {
  metrics.tenantLimit.reset();
  metrics.tenantLimitUsed.reset();
  for (const tenant of src.tenantIds()) {
    metrics.tenantLimit.set({ tenant, limit: "concurrentRuns" }, src.concurrency(tenant).limit);
    metrics.tenantLimitUsed.set({ tenant, limit: "concurrentRuns" }, 0);
  }
}

/** Reads each named tenant's use from the queue before every scrape; returns the unregister. */
export function registerTenantLimitGauges(
  src: TenantLimitGaugeSource,
  queue: RunQueue,
): () => void {
  return onScrape(async () => {
    const tenants = src.tenantIds();
    const used = await queue.tenantSlots(tenants);
    tenants.forEach((tenant, i) => {
      metrics.tenantLimitUsed.set({ tenant, limit: "concurrentRuns" }, used[i] ?? 0);
    });
  });
}
