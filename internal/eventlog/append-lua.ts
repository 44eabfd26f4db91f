/** The append script of the Redis event log (see redis-event-log.ts), kept as source text. */
export const APPEND_LUA = `
-- Appends batches of sealed events to one or more runs; each run's batch is atomic and
-- independent (one run's conflict never affects another's). Several runs share one call so
-- that many busy runs cost one script invocation, not one each.
-- KEYS: per run, 4 keys: stream, meta hash, tenant index (zset), session index (zset)
--       (the two indexes only with a run's first event; "" otherwise)
-- ARGV: per run: fence ("" = server append, no lease), expected head seq, expected head
--       hash, run id, tenant, session (these three only with the first event; "" otherwise),
--       hash of the last event, n, then n events' json
--       (only the last hash is kept: it is the new head; the others live in the events)
-- Reply: per run, {"OK", seq} | {"FENCED", epoch} | {"CONFLICT", seq, hash}. Sending the
-- same call again after it was applied answers OK again and writes nothing.
local out = {}
local a = 1
for r = 0, (#KEYS / 4) - 1 do
  local k = r * 4
  local fence, expected, prevHash = ARGV[a], tonumber(ARGV[a + 1]), ARGV[a + 2]
  local runId, tenant, session, lastHash = ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6]
  local n = tonumber(ARGV[a + 7])
  local first = a + 8
  a = first + n
  local meta = KEYS[k + 2]
  local h = redis.call('HMGET', meta, 'seq', 'hash', 'epoch')
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
  if landed then
    out[#out + 1] = {'OK', tostring(expected + n)}
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
    end
    if n > 0 then hash = lastHash end
    if expected == 0 then
      -- First event of the run: record who owns it and index it (ULIDs sort by time).
      redis.call('HSET', meta, 'tenant', tenant, 'session', session)
      redis.call('ZADD', KEYS[k + 3], 0, runId)
      redis.call('ZADD', KEYS[k + 4], 0, runId)
    end
    redis.call('HSET', meta, 'seq', seq, 'hash', hash)
    out[#out + 1] = {'OK', tostring(seq)}
  end
end
return out
`;
