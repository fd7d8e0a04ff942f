-- Delete the lock whoever holds it, if it is in the given mode: Redisson
-- RedissonReadLock#forceUnlockAsync (mode 'read') and RedissonWriteLock#forceUnlockAsync (mode
-- 'write'), waking our waiters as a release would. Read holds' timeout keys expire on their own.
-- KEYS[1]  lock name (HASH, see lib/rw.lua)
-- KEYS[2]  Redisson's channel "redisson_rwlock:{<name>}"
-- KEYS[3]  registered waiters "edgelock_waiting:{<name>}" (ZSET)
-- KEYS[4]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[5]  the lock's epoch "edgelock_epoch:{<name>}" (see lib/rw.lua)
-- ARGV[1]  'read' | 'write'
-- Returns  1 deleted | 0 not locked in that mode
local waiting = KEYS[3]
local wake = KEYS[4]
-- @include lib/wake.lua

if redis.call('hget', KEYS[1], 'mode') ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[1], KEYS[5])
redis.call('publish', KEYS[2], ARGV[1] == 'write' and 1 or 0)
wake_all()
return 1
