/**
 * The one place that names the Redis event log's keys (redis-event-log.ts), shared with the
 * run intake (scheduler/redis-run-admission.ts), whose script appends a run's first event
 * with the log's own append body. Must never drift from what the log reads.
 *
 *   run:{run}:events                 stream  the run's events, entry id 0-{seq}
 *   run:{run}:meta                   hash    seq, hash, epoch, ended, tenant, session
 *   run:{run}:namekey                string  the run's name key (hex; kernel/held-names.ts),
 *                                            never served by the API; goes with the run
 *   tenant:{t}:runs                  zset    the tenant's run ids (ListRuns)
 *   tenant:{t}:session:{s}:runs      zset    a session's run ids
 *   feed                             stream  one entry per applied commit (WatchEvents)
 */
export interface LogKeys {
  stream(runId: string): string;
  meta(runId: string): string;
  nameKey(runId: string): string;
  tenantRuns(tenantId: string): string;
  sessionRuns(tenantId: string, sessionId: string): string;
  feed: string;
}

export function logKeys(prefix: string): LogKeys {
  return {
    stream: (r) => `${prefix}run:${r}:events`,
    meta: (r) => `${prefix}run:${r}:meta`,
    nameKey: (r) => `${prefix}run:${r}:namekey`,
    tenantRuns: (t) => `${prefix}tenant:${t}:runs`,
    sessionRuns: (t, s) => `${prefix}tenant:${t}:session:${s}:runs`,
    feed: `${prefix}feed`,
  };
}
