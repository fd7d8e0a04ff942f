-- Delete the lock whoever holds it: Redisson RedissonLock#forceUnlockAsync.
-- KEYS[1]  lock name (HASH)
-- KEYS[2]  Redisson unlock channel "redisson_lock__channel:{<name>}"
-- Returns  1 a lock was deleted | 0 there was none
if redis.call('del', KEYS[1]) == 1 then
  redis.call('publish', KEYS[2], 0)
  return 1
end
return 0
