-- Give permits back by id: Redisson RedissonPermitExpirableSemaphore#tryReleaseAsync, made
-- replay-safe (a resent release answers what the first copy did). Expired permits are reclaimed
-- first, so a permit whose lease ran out counts as not held (it is back in the pool already).
-- KEYS[1]  semaphore name (STRING, available permits)
-- KEYS[2]  permit leases "{<name>}:timeout" (ZSET id bytes -> expiry ms)
-- KEYS[3]  replay records "edgelock_replay:{<name>}"
-- KEYS[4]  unused (kept so that every script keeps its key positions)
-- KEYS[5]  Redisson channel "redisson_sc:{<name>}"
-- KEYS[6]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[7]  waiters' wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[8]  permits edgelock callers took "edgelock_held:{<name>}" (ZSET, lib/permits.lua)
-- ARGV[1]  replay window in ms
-- ARGV[2]  request id of this release (a lease's release reuses its lease id)
-- ARGV[3…] permit ids, 32 hex characters each
-- Returns  how many of the permits were still held (and are now back in the pool)
-- Records  "R<count>" under "R<request id>" (apart from the acquire's record of the same id)
local name, timeouts, replayKey, _, channel, waiting, wake, held = unpack(KEYS)
local windowMs = tonumber(ARGV[1])
local id = 'R' .. ARGV[2]
-- @include lib/replay.lua
-- @include lib/wake.lua
-- @include lib/permits.lua

return replay_once(id, 'R', function()
  reclaim(clock_ms())
  return give_back(3)
end)
