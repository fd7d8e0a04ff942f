-- Release one hold of a reentrant lock: Redisson RedissonLock#unlockInnerAsync with its
-- request-id latch, so a replayed release reports the first result and never decrements twice.
-- With a fourth key it completes an idempotency key: the completion marker is recorded in the
-- same step, so no claim can slip in between the release and the record.
-- KEYS[1]  lock name (HASH)
-- KEYS[2]  replay latch of this release (the lease's latch, or a fresh one for unlock(owner))
-- KEYS[3]  Redisson unlock channel "redisson_lock__channel:{<name>}" (wakes JVM waiters)
-- KEYS[4]  optional completion marker "edgelock_done:{<name>}": STRING "1"
-- ARGV[1]  owner field
-- ARGV[2]  leaseTime in ms to restore on a partial release (0 = keep the current TTL)
-- ARGV[3]  replay window in ms (PX of the latch)
-- ARGV[4]  with KEYS[4]: completion TTL in ms (PX of the marker; an existing marker is kept)
-- Returns  1 released (last hold gone) | 2 still held (count > 0) | 0 expired (no key)
--          | 3 not owner (held by someone else)
local name = KEYS[1]
local latch = KEYS[2]
local channel = KEYS[3]
local done = KEYS[4]
local owner = ARGV[1]
local leaseMs = tonumber(ARGV[2])
local windowMs = tonumber(ARGV[3])

if done then
  -- The work finished even if the lease did not survive it: record it whatever the lock says.
  redis.call('set', done, '1', 'px', tonumber(ARGV[4]), 'nx')
end

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
