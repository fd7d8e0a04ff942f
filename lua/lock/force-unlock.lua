-- Delete the lock whoever holds it: Redisson RedissonLock#forceUnlockAsync, waking one of our
-- registered waiters as a release would.
-- KEYS[1]  lock name (HASH)
-- KEYS[2]  Redisson unlock channel "redisson_lock__channel:{<name>}"
-- KEYS[3]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[4]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- Returns  1 a lock was deleted | 0 there was none
local waiting = KEYS[3]
local wake = KEYS[4]
-- @include lib/wake.lua

if redis.call('del', KEYS[1]) == 1 then
  redis.call('publish', KEYS[2], 0)
  wake_one()
  return 1
end
return 0
