-- Keep a waiter's place: its slot (the ZSET score Redisson's scripts read) lasts at least slotMs
-- more, never shortened, e.g. while it blocks longer than its slot allows.
-- It never queues an owner that is not queued, so a late copy is harmless and needs no replay
-- record. Holds are renewed by lua/lock/renew.lua (the fair lock's HASH is the plain lock's). A
-- lock found free is handed to the first live waiter (possibly this one, which then confirms
-- with acquire).
-- KEYS[1..5]  as lua/fair-lock/acquire.lua (lock, queue, slots, waiters, channel prefix)
-- ARGV[1]  owner field of the waiter
-- ARGV[2]  slot in ms
-- ARGV[3]  claim window in ms of a hand-off this makes
-- Returns  {0, pttl, position} as acquire's busy answer (position -1: not queued any more:
--          handed the lock, dropped as dead, or never queued)
local name = KEYS[1]
local queue = KEYS[2]
local slots = KEYS[3]
local waiters = KEYS[4]
local channel = KEYS[5]
local owner = ARGV[1]
local slotMs = tonumber(ARGV[2])
local claimMs = tonumber(ARGV[3])
-- @include lib/hold.lua
-- @include lib/fair.lua

local now = now_ms()
prune(now)
local waiter = redis.call('hget', waiters, owner)
if waiter and redis.call('zscore', slots, owner) then
  queue_up(owner, waiter, now, now + slotMs)
end
if redis.call('exists', name) == 0 then
  hand_off(now)
end
return {0, redis.call('pttl', name), redis.call('lpos', queue, owner) or -1}
