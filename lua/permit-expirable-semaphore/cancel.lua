-- Cancel a permit acquire whose answer never reached the caller (aborted while in flight, timed
-- out, or the transport failed ambiguously): whichever order the two requests reach Redis in,
-- no permit stays taken by it.
-- KEYS[1]  semaphore name (STRING, available permits)
-- KEYS[2]  permit leases "{<name>}:timeout" (ZSET id bytes -> expiry ms)
-- KEYS[3]  replay records "edgelock_replay:{<name>}"
-- KEYS[4]  unused (kept so that every script keeps its key positions)
-- KEYS[5]  Redisson channel "redisson_sc:{<name>}"
-- KEYS[6]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[7]  waiters' wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[8]  waiters' marker "edgelock_waiting:{<name>}:any" (STRING, lib/permits.lua)
-- ARGV[1]  replay window in ms
-- ARGV[2]  request id of that acquire
-- ARGV[3…] the permit ids it asked for
-- Returns  0 cancelled before it applied (a tombstone makes a late acquire a no-op)
--          | 1 the permits it took were given back (or had gone already)
--          | 2 nothing to do (already cancelled, or released)
-- Records  "C" (cancelled first) | "U" (given back)
-- Billed   after the acquire applied: EVALSHA, MGET, ZREM, INCRBY, PUBLISH, SET (6); before it:
--          EVALSHA, MGET, ZREM, SET (4)
local name, timeouts, replayKey, _, channel, waiting, wake, marker = unpack(KEYS)
local windowMs = tonumber(ARGV[1])
local id = ARGV[2]
-- @include lib/replay.lua
-- @include lib/wake.lua
-- @include lib/permits.lua

local state = redis.call('mget', replayKey .. ':' .. id, marker)
local seen, waiters = state[1], state[2]
-- "A": the acquire applied. Without a record it may have too (a lease at least the replay
-- window records nothing): its permits tell.
if seen and seen ~= 'A' then
  return 2
end
if give_back(permit_members(3), waiters) == 0 and not seen then
  replay_set(id, 'C')
  return 0
end
replay_set(id, 'U')
return 1
