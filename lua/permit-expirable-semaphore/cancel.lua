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
-- KEYS[8]  permits edgelock callers took "edgelock_held:{<name>}" (ZSET, lib/permits.lua)
-- ARGV[1]  replay window in ms
-- ARGV[2]  request id of that acquire
-- ARGV[3…] the permit ids it asked for
-- Returns  0 cancelled before it applied (a tombstone makes a late acquire a no-op)
--          | 1 the permits it took were given back (or had expired already)
--          | 2 nothing to do (already cancelled)
-- Records  "C" (cancelled first) | "U" (given back), by lib/cancel.lua
local name, timeouts, replayKey, _, channel, waiting, wake, held = unpack(KEYS)
local windowMs = tonumber(ARGV[1])
local id = ARGV[2]
-- @include lib/permits.lua
-- @include lib/cancel.lua

local function undo()
  give_back(3)
end

-- The acquire's record: "A" (its permits are the ids this cancel is given).
return cancel_or_undo(id, '^A$', undo)
