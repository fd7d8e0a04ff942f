-- Extend permits' leases: Redisson RedissonPermitExpirableSemaphore#updateLeaseTimeAsync, except
-- that a lease is never shortened (so no lease object believes it holds longer than Redis keeps
-- the permit) and several permits are renewed in one request. Expired permits are reclaimed
-- first: a permit whose lease ran out cannot be renewed.
-- KEYS[1]  semaphore name (STRING, available permits)
-- KEYS[2]  permit leases "{<name>}:timeout" (ZSET id bytes -> expiry ms)
-- KEYS[3]  Redisson channel "redisson_sc:{<name>}"
-- KEYS[4]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[5]  waiters' wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[6]  permits edgelock callers took "edgelock_held:{<name>}" (ZSET, lib/permits.lua)
-- ARGV[1]  lease in ms (each permit's expiry becomes at least now + this)
-- ARGV[2…] permit ids, 32 hex characters each
-- Returns  how many of the permits are still held (all of them renewed)
local name, timeouts, channel, waiting, wake, held = unpack(KEYS)
local leaseMs = tonumber(ARGV[1])
-- @include lib/wake.lua
-- @include lib/permits.lua

local now = clock_ms()
reclaim(now)
local count = 0
for i = 2, #ARGV do
  local member = permit_bytes(ARGV[i])
  local score = redis.call('zscore', timeouts, member)
  if score then
    count = count + 1
    local expiry = math.max(tonumber(score), now + leaseMs)
    if tonumber(score) < expiry then
      redis.call('zadd', timeouts, 'xx', expiry, member)
    end
    -- A permit a Redisson client took stays its own, whoever renews it.
    if redis.call('zscore', held, member) then
      held_set(member, expiry, now)
    end
  else
    redis.call('zrem', held, member)
  end
end
return count
