/**
 * The composition of the per-tenant limits in a server (and dev): publishes the auth
 * file's limits to the shared stores (the queue's concurrentRuns, the day ledger's daily
 * limits) at start, after every reload and every 30 s, keeps the per-tenant limit gauges,
 * and answers the API's questions (a tenant's concurrency, its spent day). Must never: run
 * in a worker (workers read the published limits), or stop a server because Redis refused
 * a publish (the last published limits stay; the next try logs again).
 */

import type { ReloadableAuth } from "../../internal/auth/reloadable.ts";
import type { Authenticator } from "../../internal/auth/tokens.ts";
import type { RunQueue } from "../../internal/scheduler/port.ts";
import {
  dayLimitsOf,
  publishTenantLimits,
  type TenantConcurrency,
  tenantConcurrency,
} from "../../internal/scheduler/tenant-limits.ts";
import type { Logger } from "../../internal/telemetry/logger.ts";
import {
  primeTenantLimitSeries,
  registerTenantLimitGauges,
} from "../../internal/telemetry/tenant-limit-gauges.ts";
import type { TenantArtifactLedger } from "../../internal/tenancy/artifact-bytes.ts";
import {
  type DaySpent,
  daySpent as daySpentOf,
  type TenantDayLedger,
  utcDay,
} from "../../internal/tenancy/day-usage.ts";
import type { Config } from "./config.ts";

/** How often a server publishes the tenants' limits again without a reload, ms. */
const TENANT_LIMITS_REPUBLISH_MS = 30_000;

/**
 * Publishes the auth file's concurrentRuns to the queue and keeps the per-tenant limit
 * gauges, at start and after every reload of the file. A publish that fails (Redis down)
 * is logged; the next reload or restart publishes again, and the queue keeps the last set.
 */
export async function startTenantLimits(
  auth: Authenticator,
  stores: { queue: RunQueue; dayLedger: TenantDayLedger; artifacts?: TenantArtifactLedger },
  cfg: Config,
  logger: Logger,
): Promise<{
  concurrency: (t: string) => TenantConcurrency;
  daySpent: (t: string) => Promise<DaySpent | undefined>;
  stop: () => void;
}> {
  const { queue, dayLedger } = stores;
  // The tenants the auth file names (its tokens' and its tenants: map's).
  const tenantIds = (): string[] => [...(auth.tenantIds?.() ?? [])];
  const named = { tenantIds, tenantConfig: (t: string) => auth.tenantConfig(t) };
  const concurrency = (t: string) => tenantConcurrency(named, cfg["tenant-limit"], t);
  const source = {
    tenantIds,
    concurrency,
    dayLimits: (t: string) => dayLimitsOf(auth.tenantConfig(t)),
  };
  const daySpent = async (t: string) => {
    const l = source.dayLimits(t);
    if (l.tokensPerDay === undefined && l.costPerDayMicros === undefined) return undefined;
    return daySpentOf(t, l, await dayLedger.useOf(t, utcDay(Date.now())));
  };
  const publish = async (): Promise<void> => {
    try {
      await publishTenantLimits(queue, named);
      await dayLedger.setLimits(new Map(tenantIds().map((t) => [t, source.dayLimits(t)] as const)));
    } catch (err) {
      logger.error(
        { err: { message: (err as Error).message } },
        "publishing the tenants' limits to Redis failed: the last published limits stay until the next try",
      );
    }
  };
  const sync = async (): Promise<void> => {
    primeTenantLimitSeries(source);
    await publish();
  };
  await sync();
  if ("onReload" in auth) (auth as ReloadableAuth).onReload(() => void sync());
  // Again every 30 s: a Redis that lost its data (no persistence, a failover to a replica
  // that missed the write) has the limits back within that, not at the next reload.
  const again = setInterval(() => void publish(), TENANT_LIMITS_REPUBLISH_MS);
  again.unref();
  const unregister = registerTenantLimitGauges(source, queue, dayLedger, stores.artifacts);
  return {
    concurrency,
    daySpent,
    stop: () => {
      clearInterval(again);
      unregister();
    },
  };
}
