/**
 * The Lua scripts of the Redis run queue (redis-run-queue.ts), kept as source text. Every
 * state change of the queue is one script, so it is atomic: a run is never half admitted,
 * half claimed or claimed without its lease and epoch bump. Scripts derive a run's keys from
 * its id (redis-keys.ts), so they are not Redis Cluster safe (nor is the event log).
 *
 * Record states: session (behind an earlier run of its session), tenant (session head,
 * waiting for a tenant slot), ready (in its band stream, holding a slot; undelivered, or
 * pending after a requeue), claimed, paused (acked; holds its session, no slot), ended.
 */
import { RUN_ENDED_LUA } from "../eventlog/append-lua.ts";
import { KEYS_LUA, keysLua } from "./redis-keys.ts";

/**
 * Idle time given to a requeued entry: far beyond any lease ttl, so the next claimer's
 * XAUTOCLAIM takes it at once; still below "now", which Redis requires of IDLE.
 */
const REQUEUE_IDLE_MS = 10_000_000_000;

/** Helpers of every state-changing script; the prefix is the Lua expression `prefixArg`. */
export function commonLua(prefixArg: string): string {
  return `${keysLua(prefixArg)}
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function field(fields, name)
  if not fields then return nil end
  for i = 1, #fields, 2 do if fields[i] == name then return fields[i + 1] end end
  return nil
end

-- Doorbell for blocked claimers (they XREAD it from the last id they saw); capped, since
-- they only need to know that something changed.
local function wake()
  redis.call('XADD', K_WAKE, 'MAXLEN', '~', '64', '*', 'w', '1')
end

local function drop_entry(band, id)
  redis.call('XACK', band, GROUP, id)
  redis.call('XDEL', band, id)
end

-- Puts a run into its band stream: claimable from now on, holding a tenant slot. Streams
-- and their group are created on first use, so a fresh (or wiped) Redis needs no setup.
local function admit(run, tenant)
  local rec = k_rec(run)
  local band = k_band(redis.call('HGET', rec, 'prio'))
  if redis.call('EXISTS', band) == 0 then
    redis.call('XGROUP', 'CREATE', band, GROUP, '0', 'MKSTREAM')
  end
  local id = redis.call('XADD', band, '*', 'run', run)
  redis.call('HSET', rec, 'state', 'ready', 'entry', id)
  redis.call('INCR', k_slots(tenant))
  wake()
end

-- The tenant's concurrentRuns as the servers published it (the auth file, setTenantLimits):
-- stored, so every process (workers have no auth file) admits by the same number; the
-- caller's limit (--tenant-limit) for a tenant the file does not limit.
local function tenant_limit(tenant, limit)
  local o = redis.call('HGET', K_TENANT_LIMITS, tenant)
  if o then return tonumber(o) end
  return limit
end

-- Fills the tenant's free slots from its waiting set, lowest aging score first.
local function fill(tenant, limit)
  limit = tenant_limit(tenant, limit)
  local slots = tonumber(redis.call('GET', k_slots(tenant)) or '0')
  while slots < limit do
    local top = redis.call('ZPOPMIN', k_waiting(tenant))
    if #top == 0 then return end
    admit(string.match(top[1], '|(.+)$'), tenant)
    slots = slots + 1
  end
end

-- The session's head (first unfinished run) may compete for a tenant slot now.
local function advance(tenant, session)
  local head = redis.call('LINDEX', k_session(tenant, session), 0)
  if not head then return end
  local rec = k_rec(head)
  local f = redis.call('HMGET', rec, 'state', 'score', 'member')
  if f[1] == 'session' then
    redis.call('HSET', rec, 'state', 'tenant')
    redis.call('ZADD', k_waiting(tenant), f[2], f[3])
  end
end

-- The run leaves the queue for good; its record stays (for ended_ttl) as a tombstone so a
-- repeated enqueue is still a no-op. The session's next run moves up.
local function finish(run, tenant, session, member, ended_ttl)
  redis.call('LREM', k_session(tenant, session), 1, run)
  redis.call('ZREM', K_QUEUED, member)
  redis.call('ZREM', K_PAUSED, run)
  redis.call('HSET', k_rec(run), 'state', 'ended', 'entry', '')
  redis.call('PEXPIRE', k_rec(run), ended_ttl)
  advance(tenant, session)
end
`;
}

const COMMON = commonLua("ARGV[1]");

/**
 * Lua: `enqueue_run(run, tenant, session, prio, aging, limit)` → {outcome, state}: adds a
 * run (a no-op "duplicate" when its record exists) or resumes a paused one. Needs COMMON.
 */
export const ENQUEUE_FN_LUA = `
local function enqueue_run(run, tenant, session, prio, aging, limit)
  local rec = k_rec(run)
  local f = redis.call('HMGET', rec, 'state', 'tenant', 'score', 'member')
  if f[1] == 'paused' then
    -- ResolveApproval: the run still heads its session and competes for a slot again, with
    -- its first score (it has waited already).
    redis.call('HSET', rec, 'state', 'tenant', 'next', 'resumed')
    redis.call('ZREM', K_PAUSED, run)
    redis.call('ZADD', k_waiting(f[2]), f[3], f[4])
    redis.call('ZADD', K_QUEUED, f[3], f[4])
    fill(f[2], limit)
    return {'resumed', redis.call('HGET', rec, 'state')}
  end
  if f[1] then return {'duplicate', f[1]} end
  local score = now_ms() + (prio - 1) * aging
  local member = string.format('%015d', redis.call('INCR', K_SEQ)) .. '|' .. run
  redis.call('HSET', rec, 'tenant', tenant, 'session', session, 'prio', prio, 'score', score,
    'member', member, 'state', 'session', 'next', 'new', 'attempts', 0)
  redis.call('RPUSH', k_session(tenant, session), run)
  redis.call('ZADD', K_QUEUED, score, member)
  advance(tenant, session)
  fill(tenant, limit)
  return {'queued', redis.call('HGET', rec, 'state')}
end
`;

/** ARGV: prefix, run, tenant, session, prio, agingMs, tenant limit. Reply {outcome, state}. */
export const ENQUEUE_LUA = `${COMMON}${ENQUEUE_FN_LUA}
return enqueue_run(ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]))
`;

/**
 * ARGV: prefix, worker, lease ttl ms, agingMs.
 * Reply {'CLAIM', run, tenant, session, prio, epoch, attempt, reason} | {'NONE', wake id} |
 * {'ENDED', run}: the run picked has ended in the event log (terminal is terminal: it is
 * never handed out). Its record is left 'ready' with its entry pending, for CANCEL_LUA to
 * remove it with the tenant's limit (which only the caller knows) and let the next run in;
 * if the caller never does, the entry idles into the next claim's scan and is found again.
 */
export const CLAIM_LUA = `${COMMON}${RUN_ENDED_LUA}
local worker, ttl, aging = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])

local function ended(run)
  return run_ended(k_meta(run), k_events(run))
end

-- The run becomes this worker's: the epoch bump (the event log's own counter) fences every
-- previous owner, and the lease is set in the same step, so no claim is ever unleased.
local function take(run, reason)
  local rec = k_rec(run)
  local epoch = redis.call('HINCRBY', k_meta(run), 'epoch', 1)
  redis.call('SET', k_lease(run), worker .. ' ' .. epoch, 'PX', ttl)
  local attempt = redis.call('HINCRBY', rec, 'attempts', 1)
  redis.call('HSET', rec, 'state', 'claimed', 'worker', worker, 'epoch', epoch)
  local f = redis.call('HMGET', rec, 'tenant', 'session', 'prio', 'member')
  redis.call('ZREM', K_QUEUED, f[4])
  return {'CLAIM', run, f[1], f[2], f[3], tostring(epoch), tostring(attempt), reason}
end

-- 1. Entries a previous owner left behind go first (they were scheduled already): requeued
--    ones, and claimed ones idle for a lease ttl. Renew resets an entry's idle time, so the
--    min-idle (= lease ttl) measures the time since the owner's last heartbeat. XPENDING's
--    IDLE filter finds the first such entry in one server-side scan of the band's PEL;
--    XAUTOCLAIM from exactly that id then moves it (only it: COUNT 1) to this worker.
for p = 1, 10 do
  local band = k_band(p)
  while redis.call('EXISTS', band) == 1 do
    local idle = redis.call('XPENDING', band, GROUP, 'IDLE', ttl, '-', '+', 1)[1]
    if not idle then break end
    local r = redis.call('XAUTOCLAIM', band, GROUP, worker, ttl, idle[1], 'COUNT', 1)
    local e = r[2][1]
    if e and e[2] then
      local run = field(e[2], 'run')
      local f = redis.call('HMGET', k_rec(run), 'state', 'next')
      if f[1] == 'ready' then
        if ended(run) then return {'ENDED', run} end
        return take(run, f[2])
      elseif f[1] == 'claimed' then
        local lease = redis.call('GET', k_lease(run))
        local holder, le = nil, nil
        if lease then holder, le = string.match(lease, '^(%S+) (%d+)$') end
        if le and le == redis.call('HGET', k_meta(run), 'epoch') then
          -- The lease key (the authority) says its owner is alive: hand the entry back
          -- (which also resets its idle time, so the scan moves on).
          redis.call('XCLAIM', band, GROUP, holder, 0, e[1], 'JUSTID')
        elseif ended(run) then
          -- Its owner died after the end (before releasing it): nothing to take over.
          redis.call('HSET', k_rec(run), 'state', 'ready')
          return {'ENDED', run}
        else
          return take(run, 'takeover')
        end
      else
        drop_entry(band, e[1]) -- left over by a run that is no longer queued
      end
    elseif e then
      drop_entry(band, e[1]) -- its message was deleted (Redis 6.2 answers nil fields)
    elseif #r[3] == 0 then
      break -- nothing moved (cannot happen in one script); never spin
    end
  end
end

-- 2. Fresh entries: each band's first undelivered entry (after the group's last-delivered
--    id); the lowest aging score (entry time + (band - 1) * aging) wins, ties to the higher band.
for _ = 1, 16 do
  local best, best_score, best_band = nil, nil, nil
  for p = 1, 10 do
    local band = k_band(p)
    if redis.call('EXISTS', band) == 1 then
      local last = '0-0'
      for _, g in ipairs(redis.call('XINFO', 'GROUPS', band)) do
        if field(g, 'name') == GROUP then last = field(g, 'last-delivered-id') end
      end
      local head = redis.call('XRANGE', band, '(' .. last, '+', 'COUNT', 1)[1]
      if head then
        local score = tonumber(string.match(head[1], '^(%d+)')) + (p - 1) * aging
        if best == nil or score < best_score then best, best_score, best_band = head, score, band end
      end
    end
  end
  if best == nil then break end
  -- Delivers exactly 'best': it is the first entry after last-delivered-id, nothing ran since.
  local e = redis.call('XREADGROUP', 'GROUP', GROUP, worker, 'COUNT', 1, 'STREAMS', best_band, '>')[1][2][1]
  local run = field(e[2], 'run')
  local f = redis.call('HMGET', k_rec(run), 'state', 'next')
  if f[1] == 'ready' then
    if ended(run) then return {'ENDED', run} end
    return take(run, f[2])
  end
  drop_entry(best_band, e[1]) -- stale; look again
end

local last = redis.call('XREVRANGE', K_WAKE, '+', '-', 'COUNT', 1)[1]
return {'NONE', last and last[1] or '0-0'}
`;

/** ARGV: prefix, run, worker, epoch, outcome, tenant limit, ended ttl. Reply {'OK'} | {'LOST', epoch}. */
export const RELEASE_LUA = `${COMMON}
local run, worker, epoch, outcome = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local limit, ended_ttl = tonumber(ARGV[6]), tonumber(ARGV[7])
local rec = k_rec(run)
local f = redis.call('HMGET', rec, 'state', 'worker', 'epoch', 'prio', 'entry', 'tenant',
  'session', 'member', 'score')
if f[1] ~= 'claimed' or f[2] ~= worker or f[3] ~= epoch then
  -- Taken over: the new owner's claim must stay untouched.
  return {'LOST', redis.call('HGET', k_meta(run), 'epoch') or '0'}
end
if redis.call('GET', k_lease(run)) == worker .. ' ' .. epoch then redis.call('DEL', k_lease(run)) end
local band = k_band(f[4])
if outcome == 'requeue' then
  -- Stays pending (same entry, same place, same slot, same session) but looks expired
  -- long ago, so the next claim's XAUTOCLAIM takes it at once.
  redis.call('XCLAIM', band, GROUP, worker, 0, f[5], 'IDLE', ${REQUEUE_IDLE_MS}, 'JUSTID')
  redis.call('HSET', rec, 'state', 'ready', 'next', 'requeued')
  redis.call('ZADD', K_QUEUED, f[9], f[8])
  wake()
  return {'OK'}
end
drop_entry(band, f[5])
redis.call('DECR', k_slots(f[6]))
if outcome == 'paused' then
  redis.call('HSET', rec, 'state', 'paused', 'entry', '')
  redis.call('ZADD', K_PAUSED, now_ms(), run)
else
  finish(run, f[6], f[7], f[8], ended_ttl)
end
fill(f[6], limit)
wake()
return {'OK'}
`;

/** ARGV: prefix, run, tenant limit, ended ttl. Reply {'OK'} | {'NO', state}. */
export const CANCEL_LUA = `${COMMON}
local run, limit, ended_ttl = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local f = redis.call('HMGET', k_rec(run), 'state', 'tenant', 'session', 'prio', 'entry', 'member')
local st = f[1]
if st ~= 'session' and st ~= 'tenant' and st ~= 'ready' and st ~= 'paused' then
  return {'NO', st or ''}
end
if st == 'tenant' then redis.call('ZREM', k_waiting(f[2]), f[6]) end
if st == 'ready' then
  drop_entry(k_band(f[4]), f[5]) -- undelivered, or pending after a requeue: gone either way
  redis.call('DECR', k_slots(f[2]))
end
finish(run, f[2], f[3], f[6], ended_ttl)
fill(f[2], limit)
return {'OK'}
`;

/** ARGV: prefix, run, worker, epoch, ttl. Reply {'OK'} | {'LOST', epoch}. */
export const RENEW_LUA = `${COMMON}
local run, worker, epoch, ttl = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local cur = redis.call('HGET', k_meta(run), 'epoch') or '0'
if cur ~= epoch then return {'LOST', cur} end
local mine = worker .. ' ' .. epoch
local f = redis.call('HMGET', k_rec(run), 'state', 'worker', 'epoch', 'prio', 'entry')
local claimed = f[1] == 'claimed' and f[2] == worker and f[3] == epoch
-- A bare lease must still exist; a claim only needs the epoch (nobody took it over).
if not claimed and redis.call('GET', k_lease(run)) ~= mine then return {'LOST', cur} end
redis.call('SET', k_lease(run), mine, 'PX', ttl)
if claimed then
  -- Resets the entry's idle time: the heartbeat that keeps XAUTOCLAIM away.
  redis.call('XCLAIM', k_band(f[4]), GROUP, worker, 0, f[5], 'JUSTID')
end
return {'OK'}
`;

/** ARGV: prefix, run, worker, ttl. Reply {'OK', epoch} | {'HELD', holder}. */
export const ACQUIRE_LUA = `${COMMON}
local run, worker, ttl = ARGV[2], ARGV[3], tonumber(ARGV[4])
local f = redis.call('HMGET', k_rec(run), 'state', 'worker')
if f[1] == 'claimed' then return {'HELD', 'the queue (claimed by ' .. f[2] .. ')'} end
local cur = redis.call('HGET', k_meta(run), 'epoch') or '0'
local lease = redis.call('GET', k_lease(run))
if lease then
  local holder, le = string.match(lease, '^(%S+) (%d+)$')
  if le == cur then return {'HELD', holder} end
end
local epoch = redis.call('HINCRBY', k_meta(run), 'epoch', 1)
redis.call('SET', k_lease(run), worker .. ' ' .. epoch, 'PX', ttl)
return {'OK', tostring(epoch)}
`;

/** ARGV: prefix, run, worker, epoch. Drops the lease key if it is still this holder's. */
export const LEASE_RELEASE_LUA = `${KEYS_LUA}
if redis.call('GET', k_lease(ARGV[2])) == ARGV[3] .. ' ' .. ARGV[4] then
  redis.call('DEL', k_lease(ARGV[2]))
end
return {'OK'}
`;

/**
 * ARGV: prefix, default tenant limit, then tenant, limit pairs: the tenants' concurrentRuns
 * from the auth file, replacing the whole published set in one step. Every tenant whose
 * limit was or is now published gets its free slots filled (a raised limit lets held runs
 * start at once; a lowered one lets running runs finish and admits nobody until below it).
 * Reply {'OK', tenants refilled}.
 */
export const SET_LIMITS_LUA = `${COMMON}
local default = tonumber(ARGV[2])
local touched = {}
for _, t in ipairs(redis.call('HKEYS', K_TENANT_LIMITS)) do touched[t] = true end
redis.call('DEL', K_TENANT_LIMITS)
for i = 3, #ARGV, 2 do
  redis.call('HSET', K_TENANT_LIMITS, ARGV[i], ARGV[i + 1])
  touched[ARGV[i]] = true
end
local n = 0
for t in pairs(touched) do fill(t, default); n = n + 1 end
wake()
return {'OK', n}
`;

/** ARGV: prefix, run. Reply {} | {state, session position, overall rank} (1-based). */
export const POSITION_LUA = `${KEYS_LUA}
local run = ARGV[2]
local f = redis.call('HMGET', k_rec(run), 'state', 'tenant', 'session', 'member')
local st = f[1]
if st ~= 'session' and st ~= 'tenant' and st ~= 'ready' then return {} end
local pos = redis.call('LPOS', k_session(f[2], f[3]), run)
local rank = redis.call('ZRANK', K_QUEUED, f[4])
if not pos or not rank then return {} end
return {st, pos + 1, rank + 1}
`;

/**
 * ARGV: prefix, most runs to look at. Reply {paused, looked, band 1 count, …, band 10
 * count}: queued runs (waiting or ready) by priority band, for the metrics. Reads at most
 * the given number of queued runs (oldest first), so a scrape stays bounded.
 */
export const STATS_LUA = `${KEYS_LUA}
local counts = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
local members = redis.call('ZRANGE', K_QUEUED, 0, tonumber(ARGV[2]) - 1)
for _, m in ipairs(members) do
  local run = string.match(m, '|(.+)$')
  local p = tonumber(run and redis.call('HGET', k_rec(run), 'prio') or '0') or 0
  if p >= 1 and p <= 10 then counts[p] = counts[p] + 1 end
end
local out = {redis.call('ZCARD', K_PAUSED), #members}
for i = 1, 10 do out[#out + 1] = counts[i] end
return out
`;
