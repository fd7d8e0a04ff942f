-- Extend permits' leases: Redisson RedissonPermitExpirableSemaphore#updateLeaseTimeAsync, except
-- that a lease is never shortened (so no lease object believes it holds longer than Redis keeps
-- the permit) and several permits are renewed in one request. A permit whose lease ran out
-- cannot be renewed: it is reclaimed instead (with every other expired permit).
-- KEYS[1]  semaphore name (STRING, available permits)
-- KEYS[2]  permit leases "{<name>}:timeout" (ZSET id bytes -> expiry ms)
-- KEYS[3]  Redisson channel "redisson_sc:{<name>}"
-- KEYS[4]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[5]  waiters' wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[6]  waiters' marker "edgelock_waiting:{<name>}:any" (STRING, lib/permits.lua)
-- ARGV[1]  lease in ms (each permit's expiry becomes at least now + this)
-- ARGV[2…] permit ids, 32 hex characters each
-- Returns  how many of the permits are still held (all of them renewed)
-- Billed   EVALSHA, TIME, ZMSCORE, ZADD (4)
local name, timeouts, channel, waiting, wake, marker = unpack(KEYS)
local leaseMs = tonumber(ARGV[1])
-- @include lib/wake.lua
-- @include lib/permits.lua

local now = clock_ms()
local members = permit_members(2)
local expiry = now + leaseMs
local scored = {'xx', 'gt'}
local expired = false
for i, score in ipairs(redis.call('zmscore', timeouts, unpack(members))) do
  if score and tonumber(score) > now then
    scored[#scored + 1] = expiry
    scored[#scored + 1] = members[i]
  elseif score then
    expired = true
  end
end
if expired then
  reclaim(now, redis.call('get', marker))
end
-- GT: a later expiry (a longer lease, or Redisson's for no lease) stays.
if #scored > 2 then
  redis.call('zadd', timeouts, unpack(scored))
end
return (#scored - 2) / 2
