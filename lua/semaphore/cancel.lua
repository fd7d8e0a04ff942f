-- Cancel a permit acquire whose answer never reached the caller (aborted while in flight, timed
-- out, or the transport failed ambiguously): whichever order the two requests reach Redis in,
-- the permits it took are given back and no permit is lost.
-- KEYS[1]  semaphore name (STRING, available permits)
-- KEYS[2]  replay records "edgelock_replay:{<name>}"
-- KEYS[3]  unused (kept so that every script keeps its key positions)
-- KEYS[4]  Redisson channel "redisson_sc:{<name>}"
-- KEYS[5]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[6]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[7]  permits taken by edgelock callers and the waiter mark "edgelock_taken:{<name>}"
--          (STRING, see lib/taken.lua)
-- ARGV[1]  replay window in ms
-- ARGV[2]  request id of that acquire
-- Returns  0 cancelled before it applied (a tombstone makes a late acquire a no-op)
--          | 1 the permits it took were given back
--          | 2 nothing to do (already cancelled or given back)
-- Records  "C" (cancelled first) | "U" (given back), by lib/cancel.lua
-- Billed   cancelled first: EVALSHA, GET record, SET record: 3
local name, replayKey, _, channel, waiting, wake, takenKey = unpack(KEYS)
local windowMs = tonumber(ARGV[1])
local id = ARGV[2]
-- @include lib/wake.lua
-- @include lib/taken.lua
-- @include lib/cancel.lua

local function undo(took)
  local available = redis.call('incrby', name, tonumber(took))
  taken_sub(tonumber(took))
  redis.call('publish', channel, available)
  wake_n(available)
end

-- The acquire's record: "A<permits it took>".
return cancel_or_undo(id, '^A(%d+)$', undo)
