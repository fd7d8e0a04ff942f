-- Delete the fair lock whoever holds it (Redisson RedissonFairLock#forceUnlockAsync) and pass it
-- to the first live waiter at once, as a release would: the queue does not wait for a re-check.
-- KEYS[1]  lock name (HASH)
-- KEYS[2]  replay records "edgelock_replay:{<name>}" (unused: same KEYS as the other scripts)
-- KEYS[3]  older replay records "edgelock_replay:{<name>}:old" (unused)
-- KEYS[4]  Redisson channel "redisson_lock__channel:{<name>}" (and the per-waiter prefix)
-- KEYS[5]  queue "redisson_lock_queue:{<name>}"
-- KEYS[6]  slots "redisson_lock_timeout:{<name>}"
-- KEYS[7]  edgelock's waiters "edgelock_waiters:{<name>}"
-- KEYS[8]  wake list prefix "edgelock_wake:{<name>}"
-- ARGV[1]  claim window in ms of the grant to the next waiter
-- Returns  1 a lock was deleted | 0 there was none
local name = KEYS[1]
local channel = KEYS[4]
local queue = KEYS[5]
local zset = KEYS[6]
local waiters = KEYS[7]
local wakePrefix = KEYS[8]
local claimMs = tonumber(ARGV[1])
-- @include lib/hold.lua
-- @include lib/fair.lua

local deleted = redis.call('del', name)
if deleted == 1 then
  redis.call('publish', channel, 0)
end
hand_off(now_ms())
return deleted
