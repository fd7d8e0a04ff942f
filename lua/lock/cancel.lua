-- Cancel an acquire whose answer never reached the caller (aborted while in flight, or the
-- transport failed ambiguously). Whatever the order in which the two requests reach Redis, the
-- acquire takes effect at most momentarily and no hold is left behind.
-- KEYS[1]  lock name (HASH)
-- KEYS[2]  replay latch of the acquire being cancelled
-- KEYS[3]  Redisson unlock channel "redisson_lock__channel:{<name>}"
-- ARGV[1]  owner field of that acquire
-- ARGV[2]  replay window in ms (PX of the latch)
-- Returns  0 cancelled before it applied (a tombstone makes a late acquire a no-op)
--          | 1 the applied hold was undone | 2 nothing to do (already cancelled or released)
local name = KEYS[1]
local latch = KEYS[2]
local channel = KEYS[3]
local owner = ARGV[1]
local windowMs = tonumber(ARGV[2])

local seen = redis.call('get', latch)
if not seen then
  redis.call('set', latch, 'C', 'px', windowMs)
  return 0
end
if seen ~= 'A' then
  return 2
end
if redis.call('hexists', name, owner) == 1 then
  if redis.call('hincrby', name, owner, -1) <= 0 then
    redis.call('del', name)
    redis.call('publish', channel, 0)
  end
end
redis.call('set', latch, 'U', 'px', windowMs)
return 1
