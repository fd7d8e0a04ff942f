-- Read a semaphore's state in one request, changing nothing.
-- KEYS[1]  semaphore name (STRING, available permits)
-- KEYS[2]  permits set "edgelock_permits:{<name>}" (STRING)
-- KEYS[3]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- Returns  {available (missing: 0), permits set (-1 when none is recorded), PTTL of the
--          semaphore key, live registered waiters, 1 if the semaphore exists else 0}
-- Billed   EVALSHA, TIME, GET, GET, ZCOUNT, PTTL, EXISTS: 7
local name = KEYS[1]
-- @include lib/clock.lua
local now = clock_ms()
local available = tonumber(redis.call('get', name)) or 0
local limit = tonumber(redis.call('get', KEYS[2])) or -1
local waiters = redis.call('zcount', KEYS[3], now, '+inf')
return {available, limit, redis.call('pttl', name), waiters, redis.call('exists', name)}
