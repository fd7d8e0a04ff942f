-- Read a latch's state in one request (Redisson RCountDownLatch#getCount is GET, a missing key
-- counting as 0), with the number of edgelock waiters registered now. Read-only.
-- KEYS[1]  latch name: STRING, the count (Redisson layout)
-- KEYS[2]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- Returns  {count (0: open), pttl of the latch in ms (-2 absent, -1 no TTL), live waiters}
--          | an error reply when the key holds something other than an integer
local name, waiting = unpack(KEYS)
-- @include lib/clock.lua

local count = tonumber(redis.call('get', name) or '0')
if not count then
  return redis.error_reply('ERR the latch count is not an integer')
end
local now = clock_ms()
local live = redis.call('zcount', waiting, '(' .. now, '+inf')
return {math.max(count, 0), redis.call('pttl', name), live}
