-- Add (or with a negative count remove) permits: Redisson RedissonSemaphore#addPermits, made
-- replay-safe, with INCRBY instead of Redisson's GET + SET (which dropped the key's TTL). The
-- permits set move with the available ones, so releases stay bounded by the new total.
-- KEYS[1]  semaphore name (STRING, available permits; may go below 0, as in Redisson)
-- KEYS[2]  permits set "edgelock_permits:{<name>}" (STRING)
-- KEYS[3]  replay records "edgelock_replay:{<name>}"
-- KEYS[4]  unused (kept so that every script keeps its key positions)
-- KEYS[5]  Redisson channel "redisson_sc:{<name>}"
-- KEYS[6]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[7]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- ARGV[1]  permits to add (non-zero integer, negative to remove)
-- ARGV[2]  replay window in ms
-- ARGV[3]  request id
-- Returns  available permits after the call (also for a replay of an applied call)
-- Records  "P"
-- Billed   EVALSHA, GET record, EXISTS, INCRBY set, INCRBY, PUBLISH, ZRANGE, SET record: 8
local name, limitKey, replayKey, _, channel, waiting, wake = unpack(KEYS)
local delta = tonumber(ARGV[1])
local windowMs = tonumber(ARGV[2])
local id = ARGV[3]
-- @include lib/replay.lua
-- @include lib/wake.lua

if replay_get(id) then
  return tonumber(redis.call('get', name)) or 0
end
-- A semaphore a Redisson client set has no recorded total: it keeps none (unbounded releases).
if redis.call('exists', limitKey) == 1 or redis.call('exists', name) == 0 then
  redis.call('incrby', limitKey, delta)
end
local after = redis.call('incrby', name, delta)
redis.call('publish', channel, after)
if after > 0 then
  wake_n(after)
end
replay_set(id, 'P')
return after
