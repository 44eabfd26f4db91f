/**
 * The append script of the Redis event log (see redis-event-log.ts), kept as source text,
 * and the one Lua helper that tells whether a run ended (shared with the run queue's claim
 * script, which must never hand out an ended run).
 */

/**
 * Lua: `run_ended(meta, stream)` → the terminal type of the run ("run.completed",
 * "run.failed", "run.cancelled") or false while it is live. The append script records the
 * end in the run's meta hash (field `ended`: the terminal type; "" while live, written with
 * the run's first event). A run written before that field existed has no `ended` field:
 * its last event is decoded once and the answer recorded, so the rule holds for old runs
 * too at the cost of one look per run.
 */
export const RUN_ENDED_LUA = `
local TERMINAL = {['run.completed'] = true, ['run.failed'] = true, ['run.cancelled'] = true}
local function run_ended(meta, stream)
  local e = redis.call('HGET', meta, 'ended')
  if e == false then
    if tonumber(redis.call('HGET', meta, 'seq') or '0') == 0 then return false end
    local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)[1]
    e = ''
    if last then
      local ok, ev = pcall(cjson.decode, last[2][2])
      if ok and type(ev) == 'table' and TERMINAL[ev['type']] then e = ev['type'] end
    end
    redis.call('HSET', meta, 'ended', e)
  end
  if e == '' then return false end
  return e
end
`;

/**
 * Entries the log-wide feed keeps (approximately: XADD MAXLEN ~). One entry per commit of a
 * run, so at several events per commit this is millions of events; a reader further behind
 * than this gets OUT_OF_RANGE (WatchEvents) or a gap counted by its sink.
 */
export const FEED_MAX_LEN = 500_000;

/**
 * The append script's body (needs RUN_ENDED_LUA before it): reads KEYS and ARGV from their
 * first entries and ends with `return out`. The run intake (scheduler/redis-run-admission.ts)
 * wraps it in a function to append a run's first event and enqueue the run in one script.
 */
export const APPEND_BODY_LUA = `
-- Appends batches of sealed events to one or more runs; each run's batch is atomic and
-- independent (one run's conflict never affects another's). Several runs share one call so
-- that many busy runs cost one script invocation, not one each.
-- KEYS: per run, 4 keys: stream, meta hash, tenant index (zset), session index (zset)
--       (the two indexes only with a run's first event; PREFIX..unused otherwise); then, last, the
--       log-wide feed (stream): one entry per applied commit {r: run, t: tenant, a: first
--       seq, b: last seq}, in the order commits were applied, capped at ~FEED_MAX_LEN.
-- ARGV: per run: fence ("" = server append, no lease), expected head seq, expected head
--       hash, known head seq and hash (the newest head the writers saw; "0" and "" = no
--       check), run id, tenant, session (these two only with the first event; "" otherwise),
--       hash of the last event, terminal type of the last event ("" when it does not end the
--       run; the writer never puts an event after a terminal one), n, then n events' json
--       (only the last hash is kept: it is the new head; the others live in the events)
-- Reply: per run, {"OK", seq} | {"DELETED"} | {"ENDED", type, seq, hash} | {"REWOUND", seq, hash} |
-- {"FENCED", epoch} | {"CONFLICT", seq, hash}. Sending the same call again after it was applied answers OK
-- again and writes nothing.
-- True when the stream holds the event (kseq, khash): the head itself, or an earlier entry
-- whose top-level hash member (right after eventId in canonical JSON; an escaped string
-- value can never hold the unescaped '":"' this pattern needs) is khash.
local function holds(stream, seq, hash, kseq, khash)
  if seq < kseq then return false end
  if seq == kseq then return hash == khash end
  local e = redis.call('XRANGE', stream, '0-' .. kseq, '0-' .. kseq)[1]
  if e == nil then return false end
  local h = string.match(e[2][2], '"eventId":"[0-9A-Za-z]+","hash":"(%x+)"')
  return h == khash
end
local out = {}
local a = 1
local feed = KEYS[#KEYS]
for r = 0, ((#KEYS - 1) / 4) - 1 do
  local k = r * 4
  local fence, expected, prevHash = ARGV[a], tonumber(ARGV[a + 1]), ARGV[a + 2]
  local knownSeq, knownHash = tonumber(ARGV[a + 3]), ARGV[a + 4]
  local runId, tenant, session, lastHash = ARGV[a + 5], ARGV[a + 6], ARGV[a + 7], ARGV[a + 8]
  local ends, n = ARGV[a + 9], tonumber(ARGV[a + 10])
  local first = a + 11
  a = first + n
  local meta = KEYS[k + 2]
  -- The key prefix, from the meta key's name (P .. 'run:' .. id .. ':meta'): the run's
  -- tombstone and the artifact reference sets live under it (internal/lifecycle).
  local P = string.sub(meta, 1, #meta - #runId - 9)
  local h = redis.call('HMGET', meta, 'seq', 'hash', 'epoch', 'ended', 'tenant')
  local seq = tonumber(h[1]) or 0
  local hash = h[2] or ''
  local epoch = tonumber(h[3]) or 0
  -- A commit that already landed (its reply was lost and the client sent it again, as
  -- ioredis does after a reconnect): the entry at its last seq is its last event, byte for
  -- byte (event ids are unique). Acknowledge it instead of reporting a conflict, which
  -- would make the writer re-seal the same events on top of themselves (duplicates).
  local landed = false
  if n > 0 and seq >= expected + n then
    local e = redis.call('XRANGE', KEYS[k + 1], '0-' .. (expected + n), '0-' .. (expected + n))
    landed = e[1] ~= nil and e[1][2][2] == ARGV[first + n - 1]
  end
  local ended = false
  if not landed then
    ended = h[4]
    if ended == false then ended = run_ended(meta, KEYS[k + 1])
    elseif ended == '' then ended = false end
  end
  if redis.call('EXISTS', P .. 'run:' .. runId .. ':deleted') == 1 then
    -- A deleted run (internal/lifecycle) is never written again, whoever writes: its id
    -- must not come back (a straggling writer, a replayed commit).
    out[#out + 1] = {'DELETED'}
  elseif landed then
    out[#out + 1] = {'OK', tostring(expected + n)}
  elseif ended then
    -- Terminal is terminal: nothing after run.completed/failed/cancelled, whoever writes
    -- (checked before the fence and the head: retrying can never help).
    out[#out + 1] = {'ENDED', ended, tostring(seq), hash}
  elseif knownSeq > 0 and not holds(KEYS[k + 1], seq, hash, knownSeq, knownHash) then
    -- A rewound log: the writers saw an event this store does not hold (it lost
    -- acknowledged writes). Sealing on the older head would hide the loss: refuse.
    out[#out + 1] = {'REWOUND', tostring(seq), hash}
  elseif fence ~= '' and tonumber(fence) ~= epoch then
    -- A stale owner (its lease epoch was bumped by a new owner) must never write.
    out[#out + 1] = {'FENCED', tostring(epoch)}
  elseif seq ~= expected or (seq > 0 and hash ~= prevHash) then
    -- Compare-and-append: the events were sealed against this exact head.
    out[#out + 1] = {'CONFLICT', tostring(seq), hash}
  else
    for i = first, first + n - 1 do
      seq = seq + 1
      redis.call('XADD', KEYS[k + 1], '0-' .. seq, 'e', ARGV[i])
      -- Artifact references (lifecycle/artifact-refs.ts): every blob an event names, in the
      -- same atomic step, so deleting another run never removes a blob this one needs.
      for d in string.gmatch(ARGV[i], '%aigest":"([0-9a-f]+)"') do
        if #d == 64 then redis.call('SADD', P .. 'artifact:refs:' .. d, runId) end
      end
    end
    if n > 0 then hash = lastHash end
    if expected == 0 then
      -- First event of the run: record who owns it and index it (ULIDs sort by time).
      redis.call('HSET', meta, 'tenant', tenant, 'session', session, 'ended', '')
      redis.call('ZADD', KEYS[k + 3], 0, runId)
      redis.call('ZADD', KEYS[k + 4], 0, runId)
    end
    local t = h[5]
    if expected == 0 or t == false then t = tenant end
    if ends ~= '' and n > 0 then
      redis.call('HSET', meta, 'seq', seq, 'hash', hash, 'ended', ends)
      -- The retention index (internal/retention/redis-ended-index.ts): ended runs of the
      -- tenant by end time (ms, Redis's clock), so the sweeper finds what is due without SCAN.
      local now = redis.call('TIME')
      redis.call('ZADD', P .. 'retention:ended:' .. t, now[1] * 1000 + math.floor(now[2] / 1000), runId)
      redis.call('SADD', P .. 'retention:tenants', t)
    else
      redis.call('HSET', meta, 'seq', seq, 'hash', hash)
    end
    if n > 0 then
      redis.call('XADD', feed, 'MAXLEN', '~', ${FEED_MAX_LEN}, '*', 'r', runId, 't', t, 'a', expected + 1, 'b', seq)
    end
    out[#out + 1] = {'OK', tostring(seq)}
  end
end
return out
`;

export const APPEND_LUA = `${RUN_ENDED_LUA}${APPEND_BODY_LUA}`;
