-- Release one hold of a fair lock: Redisson RedissonFairLock's unlock with a replay record, so a
-- replayed release reports the first result and never decrements twice (nor grants twice). On
-- the last hold it hands the lock to the first live waiter (lib/fair.lua hand_off: an edgelock
-- waiter is granted it and woken through its wake list; a Redisson waiter is told on its own
-- channel), and publishes on Redisson's lock channel like a plain unlock. A lease passes the
-- epoch of its acquire: once the lock it held has expired, a newer hold of the same owner is
-- left alone. A release that finds the lock gone still passes it on to the queue.
-- KEYS[1]  lock name (HASH)
-- KEYS[2]  replay records "edgelock_replay:{<name>}"
-- KEYS[3]  older replay records "edgelock_replay:{<name>}:old"
-- KEYS[4]  Redisson channel "redisson_lock__channel:{<name>}" (and the per-waiter prefix)
-- KEYS[5]  queue "redisson_lock_queue:{<name>}"
-- KEYS[6]  slots "redisson_lock_timeout:{<name>}"
-- KEYS[7]  edgelock's waiters "edgelock_waiters:{<name>}"
-- KEYS[8]  wake list prefix "edgelock_wake:{<name>}"
-- ARGV[1]  owner field
-- ARGV[2]  leaseTime in ms to restore on a partial release, never shortening (0 = keep the TTL)
-- ARGV[3]  replay window in ms
-- ARGV[4]  request id (the lease id, or a fresh one for unlock(owner))
-- ARGV[5]  epoch of the hold being released, decimal ("0" = any hold of the owner)
-- ARGV[6]  claim window in ms of the grant to the next waiter
-- Returns  1 released (last hold gone) | 2 still held (count > 0) | 0 expired (no key, or only
--          a newer incarnation) | 3 not owner (held by someone else)
-- Records  "R<result>" for every result, so a replay answers as the first application did
local name = KEYS[1]
local replayKey = KEYS[2]
local replayOld = KEYS[3]
local channel = KEYS[4]
local queue = KEYS[5]
local zset = KEYS[6]
local waiters = KEYS[7]
local wakePrefix = KEYS[8]
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

local now = now_ms()
local result
if redis.call('hexists', name, owner) == 0 then
  result = 3
  if redis.call('exists', name) == 0 then
    result = 0
    hand_off(now)
  end
elseif held ~= '0' and held ~= epoch() then
  result = 0
elseif redis.call('hincrby', name, owner, -1) > 0 then
  if leaseMs > 0 then
    extend(leaseMs)
  end
  result = 2
else
  redis.call('del', name)
  -- A grant released without being confirmed may still have its token waiting.
  redis.call('del', wake_key(owner))
  redis.call('publish', channel, 0)
  hand_off(now)
  result = 1
end
replay_set(id, 'R' .. result)
return result
