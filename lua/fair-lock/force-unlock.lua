-- Delete a fair lock whoever holds it, and hand it to the first live waiter: Redisson
-- RedissonFairLock#forceUnlockAsync.
-- KEYS[1..6]  as lua/fair-lock/acquire.lua (lock, queue, slots, waiters, channel prefix, replay
--             records)
-- ARGV[1]  claim window in ms of the hand-off
-- ARGV[2]  replay window in ms
-- Returns  1 a lock was deleted | 0 there was none
-- Records  "G" for the acquire that created the lock (lib/hold.lua BY), so that a late copy of
--          it does not take the lock again
local name, queue, slots, waiters, channel, replayKey = unpack(KEYS)
local claimMs = tonumber(ARGV[1])
local windowMs = tonumber(ARGV[2])
-- @include lib/hold.lua
-- @include lib/replay.lua
-- @include lib/fair.lua

local by = redis.call('hget', name, BY)
local deleted = redis.call('del', name)
if deleted == 1 then
  if by then
    replay_set(by, 'G')
  end
  redis.call('publish', channel, 0)
end
hand_off()
return deleted
