-- A waiting call of a semaphore ends without permits (it gave up, was aborted, or failed):
-- unregister it like lua/lock/leave.lua, and give back permits a release handed it that it
-- never took (lib/permit-hand-off.lua: the message reached its client after the call ended, or
-- the call ended before it could act on it). They go to the next registered waiters as a
-- release would pass them on, or back to the pool. Applied twice, the second finds nothing
-- handed (or the hand-off's record no longer "A") and gives nothing.
-- KEYS[1]  semaphore name (STRING, available permits)
-- KEYS[2]  replay records "edgelock_replay:{<name>}"
-- KEYS[3]  unused (kept so that every script keeps its key positions)
-- KEYS[4]  Redisson channel "redisson_sc:{<name>}"
-- KEYS[5]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[6]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[7]  permits taken by edgelock callers and the waiter mark "edgelock_taken:{<name>}"
--          (STRING, see lib/taken.lua)
-- ARGV[1]  waiter id of the call
-- ARGV[2]  replay window in ms
-- Returns  1 unregistered | 0 it was not registered (the next live waiter woken, as
--          lua/lock/leave.lua) | 2 permits handed to it given back (or already gone)
-- Records  "U" under the request id the permits were handed as (a cancel or a release of that
--          id then changes nothing)
-- Billed   nothing handed: EVALSHA, GET, plus lib/wake.lua's waiting_leave
local name, replayKey, _, channel, waiting, wake, takenKey = unpack(KEYS)
local waiter = ARGV[1]
local windowMs = tonumber(ARGV[2])
-- @include lib/taken.lua
-- @include lib/permit-hand-off.lua

local from, n = handed_take(waiter)
if not from then
  return waiting_leave(waiter) and 1 or 0
end
local record = replayKey .. ':' .. from
if from == '' or redis.call('get', record) ~= 'A' .. n then
  -- Taken over by a later attempt, released, or given back already.
  return 2
end
redis.call('set', record, 'U', 'px', windowMs)
local after = redis.call('incrby', name, n)
local taken, waiters = taken_get()
taken = taken - n
if waiters then
  local more = hand_off_permits(after, handed_as_acquired)
  if more > 0 then
    after = redis.call('decrby', name, more)
  end
  taken = taken + more
  waiters = taken_waiting()
end
taken_write(taken, waiters)
redis.call('publish', channel, after)
return 2
