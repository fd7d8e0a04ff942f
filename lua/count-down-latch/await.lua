-- One attempt of a latch's await: Redisson RedissonCountDownLatch#await re-checks getCount() > 0
-- after each pub/sub wake-up; over HTTP a waiting call registers instead, so that the count-down
-- that opens the latch wakes it (lib/wake.lua). While the count is above zero, a call that blocks
-- between attempts registers (or refreshes) its waiter id; once it is zero the call unregisters
-- (its own wake list goes with it).
-- KEYS[1]  latch name: STRING, the count (Redisson layout)
-- KEYS[2]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[3]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- ARGV[1]  waiter id of a call that blocks for a wake-up between attempts ('' = none)
-- ARGV[2]  with a waiter id: how long its registration lasts, in ms
-- Returns  {count, pttl}: count 0 = open (no key, or a count <= 0 that Redisson's trySetCount(0)
--          stores), else the count; pttl of the latch in ms (-1: no TTL, -2: no key)
--          | an error reply when the key holds something other than an integer
local name, waiting, wake = unpack(KEYS)
local waiter = ARGV[1]
-- @include lib/wake.lua

local count = tonumber(redis.call('get', name) or '0')
if not count then
  return redis.error_reply('ERR the latch count is not an integer')
end
if count > 0 then
  if waiter ~= '' then
    waiting_add(waiter, tonumber(ARGV[2]))
  end
  return {count, redis.call('pttl', name)}
end
if waiter ~= '' then
  waiting_remove(waiter)
end
return {0, redis.call('pttl', name)}
