-- A waiter gives up: it leaves the queue (Redisson RedissonFairLock#acquireFailed), and if the
-- lock had been handed to it but not yet confirmed, the grant passes on to the next waiter
-- instead of lapsing after the claim window. A confirmed hold is never touched (release it).
-- Replay-safe by request id: a late copy cannot remove a later wait of the same owner.
-- KEYS[1]  lock name (HASH)
-- KEYS[2]  replay records "edgelock_replay:{<name>}"
-- KEYS[3]  older replay records "edgelock_replay:{<name>}:old"
-- KEYS[4]  Redisson channel "redisson_lock__channel:{<name>}" (and the per-waiter prefix)
-- KEYS[5]  queue "redisson_lock_queue:{<name>}"
-- KEYS[6]  slots "redisson_lock_timeout:{<name>}"
-- KEYS[7]  edgelock's waiters "edgelock_waiters:{<name>}"
-- KEYS[8]  wake list prefix "edgelock_wake:{<name>}"
-- ARGV[1]  owner field of the waiter
-- ARGV[2]  replay window in ms
-- ARGV[3]  request id
-- ARGV[4]  claim window in ms of a grant to the next waiter
-- Returns  1 left the queue | 2 its unconfirmed grant was passed on | 0 it was not waiting
-- Records  "D<result>"
local name = KEYS[1]
local replayKey = KEYS[2]
local replayOld = KEYS[3]
local channel = KEYS[4]
local queue = KEYS[5]
local zset = KEYS[6]
local waiters = KEYS[7]
local wakePrefix = KEYS[8]
local owner = ARGV[1]
local windowMs = tonumber(ARGV[2])
local id = ARGV[3]
local claimMs = tonumber(ARGV[4])
-- @include lib/replay.lua
-- @include lib/hold.lua
-- @include lib/fair.lua

local seen = replay_get(id)
if seen and string.sub(seen, 1, 1) == 'D' then
  return tonumber(string.sub(seen, 2))
end

local result = 0
if redis.call('zscore', zset, owner) or redis.call('lpos', queue, owner) then
  leave(owner)
  result = 1
elseif granted_to(owner) then
  redis.call('del', name)
  redis.call('del', wake_key(owner))
  redis.call('publish', channel, 0)
  result = 2
end
if result > 0 and redis.call('exists', name) == 0 then
  -- It may have been first in line for a free lock: the next waiter gets it now.
  hand_off(now_ms())
end
replay_set(id, 'D' .. result)
return result
