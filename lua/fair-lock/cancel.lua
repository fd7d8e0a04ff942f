-- Cancel a fair-lock acquire whose answer never reached the caller (aborted while in flight,
-- timed out, or the transport failed ambiguously). Whatever the order in which the two requests
-- reach Redis, no hold and no wait is left behind: before the acquire, a tombstone makes it a
-- no-op; after it, the hold it made is undone (passing the lock on when it was the last), or the
-- wait it queued is given up as dequeue does (passing on a grant not yet confirmed).
-- KEYS[1]  lock name (HASH)
-- KEYS[2]  replay records "edgelock_replay:{<name>}"
-- KEYS[3]  older replay records "edgelock_replay:{<name>}:old"
-- KEYS[4]  Redisson channel "redisson_lock__channel:{<name>}" (and the per-waiter prefix)
-- KEYS[5]  queue "redisson_lock_queue:{<name>}"
-- KEYS[6]  slots "redisson_lock_timeout:{<name>}"
-- KEYS[7]  edgelock's waiters "edgelock_waiters:{<name>}"
-- KEYS[8]  wake list prefix "edgelock_wake:{<name>}"
-- ARGV[1]  owner field of that acquire
-- ARGV[2]  replay window in ms
-- ARGV[3]  request id of that acquire
-- ARGV[4]  claim window in ms of a grant to the next waiter
-- Returns  0 cancelled before it applied (a tombstone makes a late acquire a no-op)
--          | 1 its hold or its wait was undone (or had already ended)
--          | 2 nothing to do (already cancelled, or it neither held nor queued)
-- Records  "C" (cancelled first) | "U" (undone)
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
if not seen then
  replay_set(id, 'C')
  return 0
end
local kind = string.sub(seen, 1, 1)
if kind == 'A' then
  -- Only the incarnation this acquire joined holds its hold; a later one belongs to later calls.
  if string.sub(seen, 2) == epoch() and redis.call('hexists', name, owner) == 1 then
    if redis.call('hincrby', name, owner, -1) <= 0 then
      redis.call('del', name)
      redis.call('publish', channel, 0)
    end
  end
elseif kind == 'Q' then
  if redis.call('zscore', zset, owner) or redis.call('lpos', queue, owner) then
    leave(owner)
  elseif granted_to(owner) then
    redis.call('del', name)
    redis.call('del', wake_key(owner))
    redis.call('publish', channel, 0)
  end
else
  return 2
end
if redis.call('exists', name) == 0 then
  hand_off(now_ms())
end
replay_set(id, 'U')
return 1
