-- Delete the lock whoever holds it: Redisson RedissonLock#forceUnlockAsync, waking one of our
-- registered waiters as a release would.
-- KEYS[1]  lock name (HASH)
-- KEYS[2]  Redisson unlock channel "redisson_lock__channel:{<name>}"
-- KEYS[3]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[4]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[5]  replay records "edgelock_replay:{<name>}" (prefix, lib/replay.lua)
-- ARGV[1]  replay window in ms
-- Returns  1 a lock was deleted | 0 there was none
-- Records  "G" for the acquire that created the lock (lib/hold.lua BY), so that a late copy of
--          it does not take the lock again
local name, channel, waiting, wake, replayKey = unpack(KEYS)
local windowMs = tonumber(ARGV[1])
-- @include lib/hold.lua
-- @include lib/replay.lua
-- @include lib/wake.lua

local by = redis.call('hget', name, BY)
if redis.call('del', name) == 1 then
  if by then
    replay_set(by, 'G')
  end
  redis.call('publish', channel, 0)
  wake_one()
  return 1
end
return 0
