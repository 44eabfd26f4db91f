/**
 * The retention sweeper: every tick, deletes the ended runs whose end time plus their
 * tenant's retention has passed (through the deletion primitive, which fences live runs),
 * trims the log-wide feed to the longest retention in force, and steps the one-time backfill
 * of runs that ended before the index existed. Work per tick is bounded (`batch` runs, one
 * backfill step, one bounded trim); several processes sweep at once without doing the same
 * work twice: each claims its runs atomically from the index (EndedRunIndex.claimDue).
 *
 * Retention is off unless the server's `--retention` or the tenant's `retention` (auth
 * file) says otherwise: a tenant without either keeps its runs forever, as before.
 *
 * Must never: consider a run that has not ended (only the index's runs are looked at, and the
 * primitive refuses a live one again), delete a run before its retention passed, or stop on
 * an error (it is counted and logged; the next tick tries again).
 */
import type { Logger } from "../telemetry/logger.ts";
import type { DeleteForRetention, EndedRunIndex } from "./port.ts";

export interface RetentionSweeperOptions {
  index: EndedRunIndex;
  deleteRun: DeleteForRetention;
  /** The retention of a tenant in ms (its override, else the server's), undefined: keep. */
  retentionOf: (tenantId: string) => number | undefined;
  /** The server's retention (`--retention`), undefined when off: then the feed is not trimmed by age. */
  serverRetentionMs: number | undefined;
  logger: Logger;
  /** Runs deleted per tick at most (default 200). */
  batch?: number;
  /** Metas looked at per backfill step (default 500). */
  backfillCount?: number;
  /** Feed entries trimmed per tick at most, about (default 50,000). */
  feedTrimLimit?: number;
  /**
   * How long a claimed run stays claimed before another sweeper may take it (a sweeper
   * killed mid-sweep); default 5 minutes. A run the primitive found live waits this too.
   */
  claimMs?: number;
  /**
   * Runs deleted at once (default 8): a deletion is a handful of round trips, so one at a
   * time would cap a sweeper at a few hundred runs a second on a remote Redis.
   */
  parallel?: number;
  /** Counters (telemetry/metrics.ts); absent in unit tests that do not look at them. */
  onDeleted?: (n: number) => void;
  onError?: () => void;
}

/** What one tick did. */
export interface SweepReport {
  deleted: number;
  gone: number;
  live: number;
  errors: number;
  feedTrimmed: number;
  backfilled: number;
}

export interface RetentionSweeper {
  /** One sweep; never throws (errors are counted in the report, logged and retried next tick). */
  tick(): Promise<SweepReport>;
}

export function createRetentionSweeper(opts: RetentionSweeperOptions): RetentionSweeper {
  const batch = opts.batch ?? 200;
  const claimMs = opts.claimMs ?? 5 * 60_000;
  // Each tick starts at the next tenant: one tenant with a backlog never starves the others.
  let turn = 0;
  const tick = async (): Promise<SweepReport> => {
    const report: SweepReport = {
      deleted: 0,
      gone: 0,
      live: 0,
      errors: 0,
      feedTrimmed: 0,
      backfilled: 0,
    };
    try {
      const step = await opts.index.backfill(opts.backfillCount ?? 500);
      report.backfilled = step.added;
      const now = await opts.index.now();
      const tenants = await opts.index.tenants();
      const start = tenants.length === 0 ? 0 : turn++ % tenants.length;
      let budget = batch;
      for (const tenantId of [...tenants.slice(start), ...tenants.slice(0, start)]) {
        if (budget <= 0) break;
        const retention = opts.retentionOf(tenantId);
        if (retention === undefined) continue;
        const due = await opts.index.claimDue(
          tenantId,
          now - retention,
          now - retention + claimMs,
          budget,
        );
        budget -= due.length;
        await eachAtMost(opts.parallel ?? 8, due, (runId) =>
          deleteOne(opts, tenantId, runId, retention, report),
        );
      }
      report.feedTrimmed = await trimFeed(opts, tenants, now);
    } catch (err) {
      report.errors++;
      opts.onError?.();
      opts.logger.warn({ err }, "retention sweep failed; retrying next tick");
    }
    if (report.deleted > 0) opts.onDeleted?.(report.deleted);
    if (report.deleted + report.feedTrimmed + report.backfilled + report.errors > 0)
      opts.logger.info({ ...report }, "retention sweep");
    return report;
  };
  return { tick };
}

async function deleteOne(
  opts: RetentionSweeperOptions,
  tenantId: string,
  runId: string,
  retention: number,
  report: SweepReport,
): Promise<void> {
  try {
    const outcome = await opts.deleteRun(tenantId, runId, retention);
    report[outcome]++;
    // A live answer keeps the claim's later score: looked at again after claimMs.
    if (outcome !== "live") await opts.index.remove(tenantId, runId);
  } catch (err) {
    // The claim stays: the run is due again after claimMs, and the primitive finishes
    // whatever this attempt began.
    report.errors++;
    opts.onError?.();
    opts.logger.warn({ err, runId, tenantId }, "retention: deleting a run failed; retrying later");
  }
}

/** Calls `fn` for every item, at most `n` at once. */
async function eachAtMost<T>(n: number, items: readonly T[], fn: (item: T) => Promise<void>) {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < items.length) await fn(items[next++] as T);
  };
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, lane));
}

/**
 * The feed is one stream for every tenant: entries older than the longest retention in
 * force go (the server's, or any tenant's override that is longer). With the server's
 * retention off, tenants without an override keep everything: the feed is not trimmed.
 */
async function trimFeed(
  opts: RetentionSweeperOptions,
  tenants: string[],
  now: number,
): Promise<number> {
  if (opts.serverRetentionMs === undefined) return 0;
  let longest = opts.serverRetentionMs;
  for (const t of tenants)
    longest = Math.max(longest, opts.retentionOf(t) ?? Number.POSITIVE_INFINITY);
  if (!Number.isFinite(longest)) return 0;
  return opts.index.trimFeed(now - longest, opts.feedTrimLimit ?? 50_000);
}

/** Runs `sweeper.tick` every `everyMs` (first tick soon after start); stop() awaits the running one. */
export function startRetentionSweep(
  sweeper: RetentionSweeper,
  everyMs: number,
): { stop(): Promise<void> } {
  let running: Promise<unknown> = Promise.resolve();
  let stopped = false;
  const run = (): void => {
    running = sweeper.tick().finally(() => {
      if (!stopped) timer = setTimeout(run, everyMs).unref();
    });
  };
  let timer = setTimeout(run, Math.min(everyMs, 5000)).unref();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
