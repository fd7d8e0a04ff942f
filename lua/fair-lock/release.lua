-- Release one hold of a fair lock: Redisson RedissonFairLock#unlockInnerAsync, replay-safe and
-- epoch-checked like the reentrant lock's release, with the hand-off inside: on the last hold
-- the lock goes straight to the first live waiter (lib/fair.lua), which a wake token wakes, and
-- Redisson's lock channel hears the unlock as from a plain RLock (JVM clients of the name).
-- KEYS[1..7]  as lua/fair-lock/acquire.lua
-- ARGV[1]  owner field
-- ARGV[2]  leaseTime in ms to restore on a partial release, never shortening (0 = keep the TTL)
-- ARGV[3]  replay window in ms
-- ARGV[4]  request id (the lease id, or a fresh one for unlock(owner))
-- ARGV[5]  epoch of the hold being released, decimal ("0" = any hold of the owner)
-- ARGV[6]  claim window in ms of the hand-off
-- Returns  1 released (last hold gone) | 2 still held | 0 expired (no key, or only a newer
--          incarnation) | 3 not owner
-- Records  "R<result>" for results 0 (its hand-off), 1 and 2
local name = KEYS[1]
local queue = KEYS[2]
local slots = KEYS[3]
local waiters = KEYS[4]
local channel = KEYS[5]
local replayKey = KEYS[6]
local replayOld = KEYS[7]
local owner = ARGV[1]
local leaseMs = tonumber(ARGV[2])
local windowMs = tonumber(ARGV[3])
local id = ARGV[4]
local held = ARGV[5]
local claimMs = tonumber(ARGV[6])
-- @include lib/replay.lua
-- @include lib/hold.lua
-- @include lib/fair.lua

local seen = replay_get(id)
if seen and string.sub(seen, 1, 1) == 'R' then
  return tonumber(string.sub(seen, 2))
end

if redis.call('hexists', name, owner) == 0 then
  if redis.call('exists', name) == 0 then
    -- Nobody holds it (the lease expired): a waiter may be stranded, hand it on. Recorded, so
    -- that a replay arriving after the hand-off still answers 0 (not "not owner").
    hand_off(clock_ms())
    replay_set(id, 'R0')
    return 0
  end
  return 3
end
if held ~= '0' and held ~= epoch() then
  return 0
end

local result = 1
if redis.call('hincrby', name, owner, -1) > 0 then
  if leaseMs > 0 then
    extend(leaseMs)
  end
  result = 2
else
  redis.call('del', name)
  redis.call('publish', channel, 0)
  hand_off(clock_ms())
end
replay_set(id, 'R' .. result)
return result
