-- Cancel a permit acquire whose answer never reached the caller (aborted while in flight, timed
-- out, or the transport failed ambiguously): whichever order the two requests reach Redis in,
-- the permits it took are given back and no permit is lost. Given back only as far as the count
-- of permits taken still holds them: when releases meanwhile gave back more than edgelock callers
-- held (a retried name-level release applies twice), some of these permits came back through
-- them already, and adding them again would make more permits than were set (lib/taken.lua).
-- KEYS[1]  semaphore name (STRING, available permits)
-- KEYS[2]  replay records "edgelock_replay:{<name>}"
-- KEYS[3]  unused (kept so that every script keeps its key positions)
-- KEYS[4]  Redisson channel "redisson_sc:{<name>}"
-- KEYS[5]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[6]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[7]  permits taken by edgelock callers and the waiter mark "edgelock_taken:{<name>}"
--          (STRING, see lib/taken.lua)
-- KEYS[8]  permits set "edgelock_permits:{<name>}" (STRING: trySetPermits + addPermits)
-- ARGV[1]  replay window in ms
-- ARGV[2]  request id of that acquire
-- Returns  0 cancelled before it applied (a tombstone makes a late acquire a no-op)
--          | 1 the permits it took were given back
--          | 2 nothing to do (already cancelled or given back)
-- Records  "C" (cancelled first) | "U" (given back), by lib/cancel.lua
-- Billed   cancelled first: EVALSHA, GET record, SET record: 3; undone: EVALSHA, GET record,
--          GET count, SET count, INCRBY, PUBLISH, ZRANGE, SET record: 8 (one EXISTS more when
--          the count holds fewer than the acquire took)
local name, replayKey, _, channel, waiting, wake, takenKey, limitKey = unpack(KEYS)
local windowMs = tonumber(ARGV[1])
local id = ARGV[2]
-- @include lib/wake.lua
-- @include lib/taken.lua
-- @include lib/cancel.lua

local function undo(took)
  took = tonumber(took)
  local taken, waiters = taken_get()
  local back = took
  -- A semaphore without a permits set (a Redisson client set it) keeps Redisson's unbounded
  -- releases: there the count only tells whose permits are missing, and all of them come back.
  if taken < took and redis.call('exists', limitKey) == 1 then
    back = taken
  end
  taken_write(taken - took, waiters)
  local available = redis.call('incrby', name, back)
  redis.call('publish', channel, available)
  wake_n(available)
end

-- The acquire's record: "A<permits it took>".
return cancel_or_undo(id, '^A(%d+)$', undo)
