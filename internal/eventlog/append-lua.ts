/** The append script of the Redis event log (see redis-event-log.ts), kept as source text. */
export const APPEND_LUA = `
-- Appends a batch of sealed events to a run, atomically.
-- KEYS: 1 stream, 2 meta hash, 3 tenant index (zset), 4 session index (zset)
-- ARGV: 1 fence ("" = server append, no lease), 2 expected head seq, 3 expected head hash,
--       4 run id, 5 tenant, 6 session, 7 hash of the last event, then the events' json...
--       (only the last hash is kept: it is the new head; the others live in the events)
-- Replies: {"OK", seq} | {"FENCED", epoch} | {"CONFLICT", seq, hash}
local meta = KEYS[2]
local h = redis.call('HMGET', meta, 'seq', 'hash', 'epoch')
local seq = tonumber(h[1]) or 0
local hash = h[2] or ''
local epoch = tonumber(h[3]) or 0

-- A stale owner (its lease epoch was bumped by a new owner) must never write.
if ARGV[1] ~= '' and tonumber(ARGV[1]) ~= epoch then
  return {'FENCED', tostring(epoch)}
end

-- Compare-and-append: the events were sealed against this exact head.
local expected = tonumber(ARGV[2])
if seq ~= expected or (seq > 0 and hash ~= ARGV[3]) then
  return {'CONFLICT', tostring(seq), hash}
end

for i = 8, #ARGV do
  seq = seq + 1
  redis.call('XADD', KEYS[1], '0-' .. seq, 'e', ARGV[i])
end
if #ARGV >= 8 then hash = ARGV[7] end

if expected == 0 then
  -- First event of the run: record who owns it and index it (ULIDs sort by time).
  redis.call('HSET', meta, 'tenant', ARGV[5], 'session', ARGV[6])
  redis.call('ZADD', KEYS[3], 0, ARGV[4])
  redis.call('ZADD', KEYS[4], 0, ARGV[4])
end
redis.call('HSET', meta, 'seq', seq, 'hash', hash)
return {'OK', tostring(seq)}
`;
