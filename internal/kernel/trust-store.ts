/**
 * Trust counters per repository, folded from the events of the tenant's recent runs of the
 * same repository (the run label `repo`; runs without one share the tenant's "default"
 * repository). Cached for a few seconds so decisions stay I/O-free on the hot path.
 */
import type { EventLog } from "../eventlog/port.ts";
import type { RunProjectionCache } from "../projections/run-cache.ts";
import { foldTrust, TRUST_EVENT_TYPES, type TrustCounters } from "./trust.ts";

export interface TrustStoreOptions {
  log: EventLog;
  runs: RunProjectionCache;
  /** Runs of the repository folded at most (newest first). Default 200. */
  maxRuns?: number;
  /** How long counters are reused, ms. Default 5000. */
  ttlMs?: number;
  now?: () => number;
}

export const REPO_LABEL = "repo";

export function createTrustStore(
  opts: TrustStoreOptions,
): (runId: string) => Promise<TrustCounters> {
  const maxRuns = opts.maxRuns ?? 200;
  const ttl = opts.ttlMs ?? 5000;
  const now = opts.now ?? Date.now;
  const cache = new Map<string, { at: number; counters: Promise<TrustCounters> }>();

  const compute = async (tenantId: string, repo: string): Promise<TrustCounters> => {
    const counters: TrustCounters = {};
    let before: string | undefined;
    let folded = 0;
    while (folded < maxRuns) {
      const page = await opts.log.listRunIds({ tenantId, before, limit: 100 });
      const runs = await opts.runs.getMany(page.runIds);
      for (const r of runs) {
        if (r === undefined || (r.labels[REPO_LABEL] ?? "default") !== repo) continue;
        const logged = await opts.log.read(r.runId, 0);
        foldTrust(
          counters,
          logged.filter((e) => TRUST_EVENT_TYPES.has(e.type)).map((e) => e.event),
        );
        if (++folded >= maxRuns) break;
      }
      if (page.next === undefined) break;
      before = page.next;
    }
    return counters;
  };

  return async (runId) => {
    const run = await opts.runs.get(runId);
    if (run === undefined) return {};
    const repo = run.labels[REPO_LABEL] ?? "default";
    const key = `${run.tenantId}\u0000${repo}`;
    const hit = cache.get(key);
    if (hit !== undefined && now() - hit.at < ttl) return hit.counters;
    const counters = compute(run.tenantId, repo);
    cache.set(key, { at: now(), counters });
    counters.catch(() => cache.delete(key));
    return counters;
  };
}
