/**
 * What GET /metrics answers: the registry's text after the scrape-time refreshers ran
 * (queue depths, the event log's up gauge). Each refresher gets a deadline: a scrape
 * during a Redis outage answers within it, with the last values and agentd_event_log_up 0.
 * Must never: hang a scrape on a dependency, or fail the scrape because one refresher did.
 */
import { withDeadline } from "../deadline.ts";
import { registry, tenantRegistry } from "./metrics.ts";

export type Refresher = () => Promise<void>;

const refreshers = new Set<Refresher>();
/** The most a scrape waits for its refreshers, ms. */
export const SCRAPE_DEADLINE_MS = 1000;

/** Registers a refresher run before every scrape; the returned function removes it. */
export function onScrape(fn: Refresher): () => void {
  refreshers.add(fn);
  return () => refreshers.delete(fn);
}

/**
 * Scrapes closer together than this share one refresh (concurrent ones wait for the same):
 * /metrics needs no token, so a flood of scrapes must not become a flood of Redis work.
 */
export const REFRESH_MIN_INTERVAL_MS = 500;
let inflight: Promise<void> | undefined;
let refreshedAt = 0;

function refresh(): Promise<void> {
  if (inflight !== undefined) return inflight;
  if (Date.now() - refreshedAt < REFRESH_MIN_INTERVAL_MS) return Promise.resolve();
  inflight = Promise.all(
    [...refreshers].map((fn) =>
      withDeadline(
        fn().catch(() => undefined),
        SCRAPE_DEADLINE_MS,
        () => undefined,
      ),
    ),
  )
    .then(() => undefined)
    .finally(() => {
      inflight = undefined;
      refreshedAt = Date.now();
    });
  return inflight;
}

/** The exposition text (Prometheus text format 0.0.4) and its content type. */
export async function scrape(): Promise<{ contentType: string; body: string }> {
  await refresh();
  return { contentType: registry.contentType, body: await registry.metrics() };
}

/** The per-tenant series (GET /metrics/tenants, admin only), after the same refresh. */
export async function scrapeTenants(): Promise<{ contentType: string; body: string }> {
  await refresh();
  return { contentType: tenantRegistry.contentType, body: await tenantRegistry.metrics() };
}
