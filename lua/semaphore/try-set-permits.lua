-- Set a semaphore's permits if it does not exist yet: Redisson RedissonSemaphore#trySetPermits
-- (SET, publish), made replay-safe so a resent call answers what the first copy did; also
-- records the permits set, the bound releases are checked against.
-- KEYS[1]  semaphore name (STRING, available permits)
-- KEYS[2]  permits set "edgelock_permits:{<name>}" (STRING)
-- KEYS[3]  replay records "edgelock_replay:{<name>}"
-- KEYS[4]  unused (kept so that every script keeps its key positions)
-- KEYS[5]  Redisson channel "redisson_sc:{<name>}"
-- KEYS[6]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[7]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- ARGV[1]  permits (integer >= 0)
-- ARGV[2]  replay window in ms
-- ARGV[3]  request id
-- Returns  1 set | 0 the semaphore already existed (nothing changed)
-- Records  "T1" | "T0"
-- Billed   setting it: EVALSHA, GET record, EXISTS, SET, SET set, PUBLISH, ZRANGE, SET record: 8
local name, limitKey, replayKey, _, channel, waiting, wake = unpack(KEYS)
local permits = tonumber(ARGV[1])
local windowMs = tonumber(ARGV[2])
local id = ARGV[3]
-- @include lib/replay.lua
-- @include lib/wake.lua

return replay_once(id, 'T', function()
  if redis.call('exists', name) == 1 then
    return 0
  end
  redis.call('set', name, permits)
  redis.call('set', limitKey, permits)
  redis.call('publish', channel, permits)
  wake_n(permits)
  return 1
end)
