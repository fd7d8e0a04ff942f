-- Keep a waiter alive: its slot (the ZSET score Redisson's scripts read, and our registry)
-- lasts at least slotMs more, never shortened. It never queues an owner that is not queued, so
-- a late copy is harmless and no replay record is needed. Holds are renewed by lua/lock/renew.lua:
-- the fair lock's HASH is the plain lock's. A lock found free is handed to the waiter in front
-- (possibly this one, which then confirms with acquire).
-- KEYS[1]  lock name (HASH)
-- KEYS[2]  replay records "edgelock_replay:{<name>}" (unused: same KEYS as the other scripts)
-- KEYS[3]  older replay records "edgelock_replay:{<name>}:old" (unused)
-- KEYS[4]  Redisson channel "redisson_lock__channel:{<name>}" (and the per-waiter prefix)
-- KEYS[5]  queue "redisson_lock_queue:{<name>}"
-- KEYS[6]  slots "redisson_lock_timeout:{<name>}"
-- KEYS[7]  edgelock's waiters "edgelock_waiters:{<name>}"
-- KEYS[8]  wake list prefix "edgelock_wake:{<name>}"
-- ARGV[1]  owner field of the waiter
-- ARGV[2]  slot in ms
-- ARGV[3]  claim window in ms of a grant to the waiter in front
-- Returns  {0, position, waitMs} as acquire's busy answer (position 0: not queued any more, e.g.
--          granted, dropped as dead, or never queued)
local name = KEYS[1]
local channel = KEYS[4]
local queue = KEYS[5]
local zset = KEYS[6]
local waiters = KEYS[7]
local wakePrefix = KEYS[8]
local owner = ARGV[1]
local slotMs = tonumber(ARGV[2])
local claimMs = tonumber(ARGV[3])
-- @include lib/hold.lua
-- @include lib/fair.lua

local now = now_ms()
prune(now)
if redis.call('zscore', zset, owner) then
  queue_up(owner, now, now + slotMs)
end
if redis.call('exists', name) == 0 then
  hand_off(now)
end
return waiting(owner, now)
