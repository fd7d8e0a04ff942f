-- Acquire (or re-enter) a reentrant lock: Redisson RedissonLock#tryLockInnerAsync, made
-- replay-safe with a per-lease latch so an HTTP retry never counts a hold twice. With a third
-- key it claims an idempotency key: a completion marker there means the work is already done.
-- KEYS[1]  lock name: HASH, field = owner, value = hold count (Redisson layout)
-- KEYS[2]  replay latch of this lease: STRING "A" (acquired) | "C" (cancelled) | "U" (undone) | "R<n>" (released)
-- KEYS[3]  optional completion marker "edgelock_done:{<name>}" (idempotency keys)
-- ARGV[1]  leaseTime in ms (PEXPIRE of the hash; reentry resets it, as Redisson does)
-- ARGV[2]  owner field "<clientId>:<taskId>"
-- ARGV[3]  replay window in ms (PX of the latch)
-- Returns  {1, holdCount} acquired | {0, pttl} held by another owner (pttl -1: no TTL)
--          | {2, pttl} the completion marker exists (its pttl, -1: no TTL)
--          | {-1, 0} this request was cancelled, undone, or its lease already expired
local name = KEYS[1]
local latch = KEYS[2]
local done = KEYS[3]
local leaseMs = tonumber(ARGV[1])
local owner = ARGV[2]
local windowMs = tonumber(ARGV[3])

local seen = redis.call('get', latch)
if seen then
  -- A replay of an applied acquire reports the hold it made instead of adding another.
  if seen == 'A' and redis.call('hexists', name, owner) == 1 then
    return {1, tonumber(redis.call('hget', name, owner))}
  end
  return {-1, 0}
end

if done and redis.call('exists', done) == 1 then
  return {2, redis.call('pttl', done)}
end

if redis.call('exists', name) == 0 or redis.call('hexists', name, owner) == 1 then
  local count = redis.call('hincrby', name, owner, 1)
  redis.call('pexpire', name, leaseMs)
  redis.call('set', latch, 'A', 'px', windowMs)
  return {1, count}
end
return {0, redis.call('pttl', name)}
