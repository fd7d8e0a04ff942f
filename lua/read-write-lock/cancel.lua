-- Cancel a read or write acquire whose answer never reached the caller: as lua/lock/cancel.lua,
-- whichever order the two requests reach Redis in, no hold is left behind and a newer hold of
-- the same owner is never touched.
-- KEYS[1]  lock name (HASH, see lib/rw.lua)
-- KEYS[2]  replay records "edgelock_replay:{<name>}"
-- KEYS[3]  unused (kept so that every script keeps its key positions)
-- KEYS[4]  Redisson's channel "redisson_rwlock:{<name>}"
-- KEYS[5]  registered waiters "edgelock_waiting:{<name>}" (ZSET)
-- KEYS[6]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[7]  timeout key prefix "{<name>}" (and the epoch key "edgelock_epoch:{<name>}")
-- ARGV[1]  'read' | 'write'
-- ARGV[2]  owner of that acquire
-- ARGV[3]  replay window in ms
-- ARGV[4]  request id of that acquire
-- Returns  0 cancelled before it applied | 1 the applied hold was undone, or had already expired
--          | 2 nothing to do
-- Records  "C" (cancelled first) | "U" (undone), as lib/cancel.lua does (its record is read in
--          the MGET here). An acquire that created the lock left no record: the epoch key names
--          it (lib/rw.lua), and it is undone too.
-- Billed   cancelled before it applied: EVALSHA, HMGET, MGET, SET (4)
local name, replayKey, _, channel, waiting, wake, prefix = unpack(KEYS)
local read = ARGV[1] == 'read'
local owner = ARGV[2]
local windowMs = tonumber(ARGV[3])
local id = ARGV[4]
local field = read and owner or owner .. ':write'
-- @include lib/rw.lua

local s = redis.call('hmget', name, 'mode', field, 'edgelock:epoch')
local v = redis.call('mget', epochKey, replayKey .. ':' .. id)
local e, by, waiters = rw_parse(v[1], s[3])
if not s[1] then
  e = ''
end

-- Only the incarnation this acquire joined (`made`) holds its hold.
local function undo(made)
  if made == e and s[2] then
    rw_drop()
    rw_settle(by, waiters)
  end
end

local seen = v[2]
if not seen and by ~= id then
  -- First: the tombstone turns the late acquire into a no-op.
  replay_set(id, 'C')
  return 0
end
-- The acquire created this incarnation (no record: its hold is gone if the hash is), or
-- recorded "A<epoch>"; any other record: already cancelled, undone or released.
local made = e
if seen then
  made = string.match(seen, '^A(.*)')
  if not made then
    return 2
  end
end
undo(made)
replay_set(id, 'U')
return 1
