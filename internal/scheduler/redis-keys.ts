/**
 * The one place that names the scheduler's Redis keys, for TypeScript and for the Lua
 * scripts (which derive a run's keys from its id, so they are emitted here too). Everything
 * lives under the prefix (default "agentd:"). The run's meta hash belongs to the event log
 * (redis-event-log.ts: `${prefix}run:${runId}:meta`, field `epoch`): the lease epoch IS the
 * event log's fencing epoch, so it must stay the same key. Never a second epoch counter.
 *
 *   run:{run}:meta            hash   (event log) field `epoch`: bumped by every claim/acquire;
 *                                    field `ended`: the run's terminal type (a claim drops an ended run)
 *   run:{run}:events          stream (event log) read only to learn the end of a run stored
 *                                    before `ended` existed
 *   run:{run}:lease           string "{worker} {epoch}", PX = lease ttl (liveness of the owner)
 *   queue:run:{run}           hash   the run's queue record: tenant, session, prio, score,
 *                                    member, state, entry, worker, epoch, attempts, next
 *   queue:band:{1..10}        stream one per priority band, field `run`; consumer group `workers`.
 *                                    Holds only claimable runs (ready) and claimed ones (in the PEL)
 *   queue:session:{t}:{s}     list   the session's unfinished runs in enqueue order; head = active
 *   queue:tenant:{t}:slots    int    the tenant's runs that are ready or claimed
 *   queue:tenant:{t}:waiting  zset   the tenant's session heads waiting for a slot, by aging score
 *   queue:tenant-limits       hash   tenant -> its concurrentRuns from the auth file (setTenantLimits);
 *                                    a tenant not named here gets the caller's --tenant-limit
 *   queue:queued              zset   every queued run by aging score (for positionOf's `overall`)
 *   queue:paused              zset   runs in state paused, by the time they paused (ms)
 *   queue:seq                 int    enqueue counter: ties of equal score keep enqueue order
 *   queue:wake                stream doorbell (capped) for blocked claimers: XADDed on admission/requeue/release
 *
 * Sorted-set members are `{seq, 15 digits}|{run}`, so equal scores sort by enqueue order.
 * Tenant ids carry no ':' (options.ts), so `{t}:{s}` cannot be read two ways.
 * Keys of one run span hash slots: like the event log, Redis Cluster is not supported yet.
 */

export const GROUP = "workers";

export interface SchedulerKeys {
  meta(runId: string): string;
  events(runId: string): string;
  lease(runId: string): string;
  record(runId: string): string;
  band(priority: number): string;
  session(tenantId: string, sessionId: string): string;
  slots(tenantId: string): string;
  waiting(tenantId: string): string;
  tenantLimits: string;
  queued: string;
  paused: string;
  seq: string;
  wake: string;
}

export function schedulerKeys(prefix: string): SchedulerKeys {
  return {
    meta: (r) => `${prefix}run:${r}:meta`,
    events: (r) => `${prefix}run:${r}:events`,
    lease: (r) => `${prefix}run:${r}:lease`,
    record: (r) => `${prefix}queue:run:${r}`,
    band: (p) => `${prefix}queue:band:${p}`,
    session: (t, s) => `${prefix}queue:session:${t}:${s}`,
    slots: (t) => `${prefix}queue:tenant:${t}:slots`,
    waiting: (t) => `${prefix}queue:tenant:${t}:waiting`,
    tenantLimits: `${prefix}queue:tenant-limits`,
    queued: `${prefix}queue:queued`,
    paused: `${prefix}queue:paused`,
    seq: `${prefix}queue:seq`,
    wake: `${prefix}queue:wake`,
  };
}

/**
 * The same layout for Lua; `prefixArg` is the Lua expression holding the prefix (ARGV[1] in
 * every queue script; the intake script passes it after the append's arguments).
 */
export function keysLua(prefixArg: string): string {
  return `
local P = ${prefixArg}
local GROUP = '${GROUP}'
local function k_meta(r) return P .. 'run:' .. r .. ':meta' end
local function k_events(r) return P .. 'run:' .. r .. ':events' end
local function k_lease(r) return P .. 'run:' .. r .. ':lease' end
local function k_rec(r) return P .. 'queue:run:' .. r end
local function k_band(p) return P .. 'queue:band:' .. p end
local function k_session(t, s) return P .. 'queue:session:' .. t .. ':' .. s end
local function k_slots(t) return P .. 'queue:tenant:' .. t .. ':slots' end
local function k_waiting(t) return P .. 'queue:tenant:' .. t .. ':waiting' end
local K_TENANT_LIMITS = P .. 'queue:tenant-limits'
local K_QUEUED = P .. 'queue:queued'
local K_PAUSED = P .. 'queue:paused'
local K_SEQ = P .. 'queue:seq'
local K_WAKE = P .. 'queue:wake'
`;
}

/** Every queue script's key layout: the prefix is ARGV[1]. */
export const KEYS_LUA = keysLua("ARGV[1]");
