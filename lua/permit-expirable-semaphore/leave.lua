-- A waiting call of a permit-expirable semaphore ends without permits (it gave up, was aborted,
-- or failed): unregister it like lua/lock/leave.lua, and give back permits a release handed it
-- that it never took (lib/permit-hand-off.lua: the message reached its client after the call
-- ended). They go to the next registered waiters as a release would pass them on, or back to the
-- pool; otherwise they would be kept from everyone until their lease (at most the claim window)
-- runs out. Applied twice, the second finds nothing handed and gives nothing.
-- KEYS[1]  semaphore name (STRING, available permits)
-- KEYS[2]  permit leases "{<name>}:timeout" (ZSET id bytes -> expiry ms)
-- KEYS[3]  replay records "edgelock_replay:{<name>}"
-- KEYS[4]  unused (kept so that every script keeps its key positions)
-- KEYS[5]  Redisson channel "redisson_sc:{<name>}"
-- KEYS[6]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[7]  waiters' wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[8]  waiters' marker "edgelock_waiting:{<name>}:any" (STRING, lib/permits.lua)
-- ARGV[1]  waiter id of the call
-- ARGV[2]  replay window in ms
-- Returns  1 unregistered | 0 it was not registered (the next live waiter woken, as
--          lua/lock/leave.lua) | 2 permits handed to it given back (or already gone)
-- Records  "U" under the request id the permits were handed as, when any was still taken (a
--          late copy of that acquire then takes nothing)
-- Billed   nothing handed: EVALSHA, GET, plus lib/wake.lua's waiting_leave
local name, timeouts, replayKey, _, channel, waiting, wake, marker = unpack(KEYS)
local waiter = ARGV[1]
local windowMs = tonumber(ARGV[2])
-- @include lib/replay.lua
-- @include lib/permits.lua

local from, n = handed_take(waiter)
if not from then
  return waiting_leave(waiter) and 1 or 0
end
if from ~= '' and give_back(permits_of(from, n), redis.call('get', marker)) > 0 then
  replay_set(from, 'U')
end
return 2
