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
 *   run:{run}:deleted                string  the run's tombstone (internal/lifecycle): set
 *                                            first when it is deleted; no append is taken after
 *   artifact:refs:{digest}           set     the runs whose events name the blob (the append
 *                                            script adds them; a deletion removes its run),
 *                                            and `u:{tenant}` for each live upload receipt
 *   artifact:receipts                zset    live upload receipts, member {digest}{tenant},
 *                                            score their expiry, ms (internal/lifecycle)
 *   artifact:removing:{digest}       string  a deletion found the blob unreferenced and is
 *                                            removing it (a minute's TTL)
 *   deleting                         zset    runs whose deletion began and has not finished
 *   retention:ended:{t}              zset    the tenant's ended runs by end time, ms (the
 *                                            append script adds a run when it ends; the
 *                                            retention sweeper and DeleteRun remove it)
 *   retention:tenants                set     tenants that have a retention:ended:{t}
 *   retention:backfill               hash    the one-time scan for runs that ended before the
 *                                            index existed: cursor, done
 *   unused                           (none)  named in a script's key list where a slot is
 *                                            not used this time (never read or written): an
 *                                            empty name would fail an ACL user limited to
 *                                            the prefix (`~agentd:*`) with NOPERM
 */
export interface LogKeys {
  stream(runId: string): string;
  meta(runId: string): string;
  nameKey(runId: string): string;
  tenantRuns(tenantId: string): string;
  sessionRuns(tenantId: string, sessionId: string): string;
  feed: string;
  tombstone(runId: string): string;
  artifactRefs(digest: string): string;
  artifactReceipts: string;
  artifactRemoving(digest: string): string;
  deleting: string;
  endedRuns(tenantId: string): string;
  retentionTenants: string;
  retentionBackfill: string;
  unused: string;
}

export function logKeys(prefix: string): LogKeys {
  return {
    stream: (r) => `${prefix}run:${r}:events`,
    meta: (r) => `${prefix}run:${r}:meta`,
    nameKey: (r) => `${prefix}run:${r}:namekey`,
    tenantRuns: (t) => `${prefix}tenant:${t}:runs`,
    sessionRuns: (t, s) => `${prefix}tenant:${t}:session:${s}:runs`,
    feed: `${prefix}feed`,
    tombstone: (r) => `${prefix}run:${r}:deleted`,
    artifactRefs: (d) => `${prefix}artifact:refs:${d}`,
    artifactReceipts: `${prefix}artifact:receipts`,
    artifactRemoving: (d) => `${prefix}artifact:removing:${d}`,
    deleting: `${prefix}deleting`,
    endedRuns: (t) => `${prefix}retention:ended:${t}`,
    retentionTenants: `${prefix}retention:tenants`,
    retentionBackfill: `${prefix}retention:backfill`,
    unused: `${prefix}unused`,
  };
}
