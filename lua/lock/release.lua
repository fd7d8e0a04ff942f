-- Release one hold of a reentrant lock: Redisson RedissonLock#unlockInnerAsync with its
-- request-id latch, so a replayed release reports the first result and never decrements twice.
-- KEYS[1]  lock name (HASH)
-- KEYS[2]  replay latch of this release (the lease's latch, or a fresh one for unlock(owner))
-- KEYS[3]  Redisson unlock channel "redisson_lock__channel:{<name>}" (wakes JVM waiters)
-- ARGV[1]  owner field
-- ARGV[2]  leaseTime in ms to restore on a partial release (0 = keep the current TTL)
-- ARGV[3]  replay window in ms (PX of the latch)
-- Returns  1 released (last hold gone) | 2 still held (count > 0) | 0 expired (no key)
--          | 3 not owner (held by someone else)
local name = KEYS[1]
local latch = KEYS[2]
local channel = KEYS[3]
local owner = ARGV[1]
local leaseMs = tonumber(ARGV[2])
local windowMs = tonumber(ARGV[3])

local seen = redis.call('get', latch)
if seen and string.sub(seen, 1, 1) == 'R' then
  return tonumber(string.sub(seen, 2))
end

if redis.call('hexists', name, owner) == 0 then
  if redis.call('exists', name) == 0 then
    return 0
  end
  return 3
end

local result = 1
if redis.call('hincrby', name, owner, -1) > 0 then
  if leaseMs > 0 then
    redis.call('pexpire', name, leaseMs)
  end
  result = 2
else
  redis.call('del', name)
  redis.call('publish', channel, 0)
end
redis.call('set', latch, 'R' .. result, 'px', windowMs)
return result
