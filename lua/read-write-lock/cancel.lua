-- Cancel a read or write acquire whose answer never reached the caller: as lua/lock/cancel.lua,
-- whichever order the two requests reach Redis in, no hold is left behind and a newer hold of
-- the same owner is never touched.
-- KEYS[1]  lock name (HASH, see lib/rw.lua)
-- KEYS[2]  replay records "edgelock_replay:{<name>}"
-- KEYS[3]  unused (kept so that every script keeps its key positions)
-- KEYS[4]  Redisson's channel "redisson_rwlock:{<name>}"
-- KEYS[5]  registered waiters "edgelock_waiting:{<name>}" (ZSET)
-- KEYS[6]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[7]  timeout key prefix "{<name>}" (and the epoch "edgelock_epoch:{<name>}")
-- ARGV[1]  'read' | 'write'
-- ARGV[2]  owner of that acquire
-- ARGV[3]  replay window in ms
-- ARGV[4]  request id of that acquire
-- Returns  0 cancelled before it applied | 1 the applied hold was undone, or had already expired
--          | 2 nothing to do
-- Records  "C" (cancelled first) | "U" (undone), by lib/cancel.lua
local name, replayKey, _, channel, waiting, wake, prefix = unpack(KEYS)
local read = ARGV[1] == 'read'
local owner = ARGV[2]
local windowMs = tonumber(ARGV[3])
local id = ARGV[4]
local field = read and owner or owner .. ':write'
-- @include lib/rw.lua
-- @include lib/cancel.lua

-- Only the incarnation this acquire joined (`made`) holds its hold.
local function undo(made)
  if made == rw_epoch() and redis.call('hexists', name, field) == 1 then
    rw_drop()
    rw_settle()
  end
end

-- The acquire's record: "A<epoch>".
return cancel_or_undo(id, '^A(.*)', undo)
