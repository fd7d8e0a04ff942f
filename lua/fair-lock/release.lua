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
-- Billed   freeing the lock, nobody queued: EVALSHA, HMGET, DEL, PUBLISH, SET, LINDEX (6)
-- ARGV[1..5] are bound by lib/release-args.lua, shared with lua/lock/release.lua.
local name, queue, slots, waiters, channel, replayKey, _ = unpack(KEYS)
-- @include lib/release-args.lua
local claimMs = tonumber(ARGV[6])
-- @include lib/release.lua
-- @include lib/fair.lua

local function free()
  hand_off()
end

-- A lock nobody holds (the lease expired) may strand a waiter: it is handed on then too.
return release_hold(free, free)
