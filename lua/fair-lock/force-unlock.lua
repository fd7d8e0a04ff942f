-- Delete a fair lock whoever holds it, and hand it to the first live waiter: Redisson
-- RedissonFairLock#forceUnlockAsync.
-- KEYS[1..5]  as lua/fair-lock/acquire.lua (lock, queue, slots, waiters, channel prefix)
-- ARGV[1]  claim window in ms of the hand-off
-- Returns  1 a lock was deleted | 0 there was none
local name, queue, slots, waiters, channel = unpack(KEYS)
local claimMs = tonumber(ARGV[1])
-- @include lib/hold.lua
-- @include lib/fair.lua

local deleted = redis.call('del', name)
if deleted == 1 then
  redis.call('publish', channel, 0)
end
hand_off(clock_ms())
return deleted
