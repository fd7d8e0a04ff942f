-- Cancel an acquire whose answer never reached the caller (aborted while in flight, timed out,
-- or the transport failed ambiguously). Whatever the order in which the two requests reach
-- Redis, the acquire takes effect at most momentarily and no hold is left behind; a hold the
-- same owner made later (after this acquire's hold expired) is never touched.
-- KEYS[1]  lock name (HASH)
-- KEYS[2]  replay records "edgelock_replay:{<name>}" (prefix, lib/replay.lua)
-- KEYS[3]  unused (kept so that every lock script keeps its key positions)
-- KEYS[4]  Redisson unlock channel "redisson_lock__channel:{<name>}"
-- KEYS[5]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[6]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- ARGV[1]  owner field of that acquire
-- ARGV[2]  replay window in ms
-- ARGV[3]  request id of that acquire
-- Returns  0 cancelled before it applied (a tombstone makes a late acquire a no-op)
--          | 1 the applied hold was undone, or had already expired
--          | 2 nothing to do (already cancelled or released)
-- Records  "C" (cancelled first) | "U" (undone), by lib/cancel.lua. An acquire that created the
--          lock left no record: the lock's BY field names it (lib/hold.lua), and it is undone too.
local name, replayKey, _, channel, waiting, wake = unpack(KEYS)
local owner = ARGV[1]
local windowMs = tonumber(ARGV[2])
local id = ARGV[3]
-- @include lib/release.lua
-- @include lib/wake.lua
-- @include lib/cancel.lua

-- Only the incarnation this acquire joined (`made`) holds its hold; a later one belongs to
-- later calls.
local function undo(made)
  if made == epoch() and redis.call('hexists', name, owner) == 1 and drop_hold() then
    wake_one()
  end
end

-- The acquire created this incarnation, which is its record.
if not replay_get(id) and redis.call('hget', name, BY) == id then
  undo(epoch())
  replay_set(id, 'U')
  return 1
end
-- The acquire's record: "A<epoch>", or "A<epoch>:<token>" from a fenced lock's acquire.
return cancel_or_undo(id, '^A([^:]*)', undo)
