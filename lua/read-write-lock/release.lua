-- Release one read or write hold: Redisson RedissonReadLock#unlockInnerAsync and
-- RedissonWriteLock#unlockInnerAsync with a replay record (a replayed release reports the first
-- result) and the epoch check of lua/lock/release.lua. A read release drops the owner's newest
-- read hold and its timeout key; the last write release turns the lock back to read mode when
-- the writer also holds reads (and, unlike Redisson, wakes the readers waiting for that).
-- KEYS[1]  lock name (HASH, see lib/rw.lua)
-- KEYS[2]  replay records "edgelock_replay:{<name>}"
-- KEYS[3]  unused (kept so that every script keeps its key positions)
-- KEYS[4]  Redisson's channel "redisson_rwlock:{<name>}" (wakes JVM waiters)
-- KEYS[5]  registered waiters "edgelock_waiting:{<name>}" (ZSET)
-- KEYS[6]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[7]  timeout key prefix "{<name>}" (and the epoch key "edgelock_epoch:{<name>}")
-- ARGV[1]  'read' | 'write'
-- ARGV[2]  owner
-- ARGV[3]  leaseTime in ms to restore on a partial write release, never shortening (0 = keep)
-- ARGV[4]  replay window in ms
-- ARGV[5]  request id (the lease id, or a fresh one for unlock(owner))
-- ARGV[6]  epoch of the hold being released, decimal ("0" = any hold of the owner)
-- Returns  1 released (the owner's last hold of that kind) | 2 still held | 0 expired (no key,
--          or only a newer incarnation) | 3 not owner
-- Records  "R<result>" for results 1 and 2; "G" for the acquire that created the lock when it
--          goes by another request (lib/rw.lua rw_gone). A release whose id is its lease's
--          writes the record that acquire's late copy finds.
-- Billed   the last hold of the lock, nobody registered: EVALSHA, HGETALL, MGET (epoch key and
--          record), DEL (hash, epoch key, the hold's timeout key), PUBLISH, SET (6)
local name, replayKey, _, channel, waiting, wake, prefix = unpack(KEYS)
local read = ARGV[1] == 'read'
local owner = ARGV[2]
local leaseMs = tonumber(ARGV[3])
local windowMs = tonumber(ARGV[4])
local id = ARGV[5]
local held = ARGV[6]
local field = read and owner or owner .. ':write'
-- @include lib/rw.lua

-- The whole hash in one read: Redisson's mode, this owner's count, and whether anyone else
-- holds (a field with a count); the epoch key and this request's record in one more.
local h = redis.call('hgetall', name)
local v = redis.call('mget', epochKey, replayKey .. ':' .. id)
local seen = v[2]
if seen and string.sub(seen, 1, 1) == 'R' then
  return tonumber(string.sub(seen, 2))
end
local mode, count, others, old
for i = 1, #h, 2 do
  local f = h[i]
  if f == 'mode' then
    mode = h[i + 1]
  elseif f == field then
    count = tonumber(h[i + 1])
  elseif f == 'edgelock:epoch' then
    old = h[i + 1]
  elseif tonumber(h[i + 1]) then
    others = true
  end
end
if not count then
  return #h > 0 and 3 or 0
end
local e, by, waiters = rw_parse(v[1], old)
if held ~= '0' and held ~= e then
  return 0
end

if count <= 1 and not others then
  -- The last hold: the lock goes, with its epoch key and the hold's timeout key, in one DEL.
  rw_delete(by, read and timeout_key(owner, count) or nil)
  rw_freed(mode, waiters)
  replay_set(id, 'R1')
  return 1
end

local result = 2
if rw_drop() <= 0 then
  result = 1
elseif not read and leaseMs > 0 then
  rw_extend(leaseMs)
end
rw_settle(by, waiters)
replay_set(id, 'R' .. result)
return result
