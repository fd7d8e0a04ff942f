-- Acquire a fair (FIFO) reentrant lock: Redisson RedissonFairLock's acquire, with server time,
-- replay records, and the confirmation of a hand-off (the "confirm" step lives here: a granted
-- waiter confirms with the same call it re-checks with).
--
-- Protocol of a waiter (every step one request; edgelock waiters and Redisson's share the queue):
--   1. acquire with slotMs > 0: takes the lock if it is free and the queue is empty or this owner
--      is first in line, re-enters a hold of this owner, or else queues the owner (once: a
--      replayed or repeated call keeps its place) and answers busy with its position.
--   2. BLPOP on its own wake list "edgelock_wake:{<name>}:<owner>", for at most the wait hint
--      and well under slotMs. The release of the holder in front grants the lock to the first
--      live waiter (lib/fair.lua hand_off: hold count 1, TTL = claim window) and pushes the
--      token there.
--   3. acquire again: with a grant waiting, it confirms it (the lock's TTL becomes leaseTime,
--      never shortened); otherwise it renews the slot and answers busy. Back to 2.
--   Where blocking commands are not served, step 2 is a sleep and the same scripts poll. A
--   grant never confirmed (waiter dead, token lost) costs the others one claim window: the lock
--   expires and the next script that finds it free (any acquire, release, dequeue, cancel or
--   renew-slot) hands it to the next waiter. A waiter whose slot lapses without renewal (an
--   acquire or renew-slot refreshes it) is dropped when it reaches the front. A waiter giving
--   up calls dequeue; an acquire whose answer was lost is undone by cancel.
--
-- KEYS[1]  lock name: HASH, field = owner, value = hold count (Redisson layout) + epoch field
-- KEYS[2]  replay records "edgelock_replay:{<name>}" (HASH request id -> state)
-- KEYS[3]  older replay records "edgelock_replay:{<name>}:old"
-- KEYS[4]  Redisson channel prefix "redisson_lock__channel:{<name>}"
-- KEYS[5]  queue "redisson_lock_queue:{<name>}" (LIST of owners)
-- KEYS[6]  slots "redisson_lock_timeout:{<name>}" (ZSET owner -> slot deadline, epoch ms)
-- KEYS[7]  edgelock's waiters "edgelock_waiters:{<name>}" (HASH owner -> slot deadline)
-- KEYS[8]  wake list prefix "edgelock_wake:{<name>}" (a waiter's list: prefix .. ':' .. owner)
-- ARGV[1]  leaseTime in ms (the lock's TTL becomes at least this; it is never shortened)
-- ARGV[2]  owner field "<clientId>:<taskId>"
-- ARGV[3]  replay window in ms
-- ARGV[4]  request id (32 hex characters)
-- ARGV[5]  slot in ms: how long the waiter counts as alive without another call from it
--          (0 = a single attempt that never queues, like Redisson's tryLock())
-- ARGV[6]  claim window in ms of a grant this call hands to the waiter in front
-- Returns  {1, holdCount, epoch} acquired (taken, re-entered or a grant confirmed)
--          | {0, position, waitMs} busy: position in the queue (1 = first; 0 = not queued),
--            waitMs = the holder's PTTL (-1: no TTL), or while the lock is free the slot left
--            to the waiter in front of this one
--          | {-1, 0, 0} this request was cancelled, or the hold it made is already gone
-- Records  "A<epoch>" acquired | "Q" queued | "B" busy without queueing; a replay of Q or B
--          only reports the owner's current place, so a late copy never queues or takes again
local name = KEYS[1]
local replayKey = KEYS[2]
local replayOld = KEYS[3]
local channel = KEYS[4]
local queue = KEYS[5]
local zset = KEYS[6]
local waiters = KEYS[7]
local wakePrefix = KEYS[8]
local leaseMs = tonumber(ARGV[1])
local owner = ARGV[2]
local windowMs = tonumber(ARGV[3])
local id = ARGV[4]
local slotMs = tonumber(ARGV[5])
local claimMs = tonumber(ARGV[6])
-- @include lib/replay.lua
-- @include lib/hold.lua
-- @include lib/fair.lua

local seen = replay_get(id)
if seen then
  local kind = string.sub(seen, 1, 1)
  if kind == 'A' then
    local made = string.sub(seen, 2)
    if made == epoch() and redis.call('hexists', name, owner) == 1 then
      return {1, tonumber(redis.call('hget', name, owner)), tonumber(made) or 0}
    end
  elseif kind == 'Q' or kind == 'B' then
    return waiting(owner, now_ms())
  end
  return {-1, 0, 0}
end

local now = now_ms()
prune(now)

if redis.call('hexists', name, owner) == 1 then
  local e = epoch()
  if granted_to(owner) then
    -- Handed over by a release: confirming makes it a hold like any other.
    redis.call('hdel', name, GRANT)
    leave(owner)
    extend(leaseMs)
    replay_set(id, 'A' .. e)
    return {1, tonumber(redis.call('hget', name, owner)), tonumber(e) or 0}
  end
  local count = redis.call('hincrby', name, owner, 1)
  extend(leaseMs)
  replay_set(id, 'A' .. e)
  return {1, count, tonumber(e) or 0}
end

if redis.call('exists', name) == 0 then
  local head = redis.call('lindex', queue, 0)
  if not head or head == owner then
    -- Also clears what a Redisson script may have left of this owner's wait (it drops waiters
    -- from the queue and ZSET, never from our registry).
    leave(owner)
    redis.call('hset', name, owner, 1)
    local e = new_epoch()
    extend(leaseMs)
    replay_set(id, 'A' .. e)
    return {1, 1, tonumber(e) or 0}
  end
  -- Free, but another waiter is first in line (its grant lapsed, or nobody released to it).
  hand_off(now)
end

if slotMs <= 0 then
  replay_set(id, 'B')
  return waiting(owner, now)
end
queue_up(owner, now, now + slotMs)
replay_set(id, 'Q')
return waiting(owner, now)
