-- Read a permit-expirable semaphore in one request, changing nothing: permits whose lease ran
-- out count as available (the next write returns them to the pool).
-- KEYS[1]  semaphore name (STRING, available permits)
-- KEYS[2]  permit leases "{<name>}:timeout" (ZSET id bytes -> expiry ms)
-- KEYS[3]  permits set "edgelock_permits:{<name>}" (STRING, see lua/semaphore/)
-- KEYS[4]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- ARGV[1]  most permits to list
-- Returns  {available, permits set (-1: none recorded), PTTL of the name, live waiters,
--          1 if the semaphore exists else 0, permits held, then per listed permit: its id
--          (32 hex characters) and its remaining lease in ms (-1: no lease)}
local name, timeouts = unpack(KEYS)
-- @include lib/clock.lua
local now = clock_ms()
local NON_EXPIRABLE = 922337203685477
local expired = redis.call('zcount', timeouts, 0, now)
local available = (tonumber(redis.call('get', name)) or 0) + expired
local limit = tonumber(redis.call('get', KEYS[3])) or -1
local waiters = redis.call('zcount', KEYS[4], now, '+inf')
local held = redis.call('zrangebyscore', timeouts, '(' .. now, '+inf', 'withscores', 'limit', 0, tonumber(ARGV[1]))
local out = {available, limit, redis.call('pttl', name), waiters, redis.call('exists', name),
  redis.call('zcount', timeouts, '(' .. now, '+inf')}
for i = 1, #held, 2 do
  local hex = string.gsub(held[i], '.', function(c)
    return string.format('%02x', string.byte(c))
  end)
  local score = tonumber(held[i + 1])
  out[#out + 1] = hex
  out[#out + 1] = score >= NON_EXPIRABLE and -1 or score - now
end
return out
