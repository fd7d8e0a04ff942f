-- Acquire (or re-enter) the read or the write lock of a read-write lock: Redisson
-- RedissonReadLock#tryLockInnerAsync and RedissonWriteLock#tryLockInnerAsync, replay-safe like
-- lua/lock/acquire.lua, with a TTL that is never shortened (Redisson's write re-entry adds the
-- lease to the TTL instead). Many readers or one writer; the writer may also take the read lock
-- (downgrade), never the reverse (an upgrade would wait for itself: it is refused). A writer
-- finding only readers that died (no live timeout key) takes the lock.
-- KEYS[1]  lock name: HASH (see lib/rw.lua)
-- KEYS[2]  replay records "edgelock_replay:{<name>}"
-- KEYS[3]  unused (kept so that every script keeps its key positions)
-- KEYS[4]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[5]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[6]  timeout key prefix "{<name>}" (read holds' keys "{<name>}:<owner>:rwlock_timeout:<k>",
--          the epoch "edgelock_epoch:{<name>}")
-- ARGV[1]  'read' | 'write'
-- ARGV[2]  leaseTime in ms
-- ARGV[3]  owner "<clientId>:<taskId>" (the writer's field is "<owner>:write")
-- ARGV[4]  replay window in ms
-- ARGV[5]  request id (32 hex characters; becomes the lease id)
-- ARGV[6]  waiter id of a call that blocks for a wake-up between attempts ('' = none)
-- ARGV[7]  with a waiter id: how long its registration lasts, in ms
-- Returns  {1, holdCount, epoch} acquired | {0, pttl, jvm} busy, jvm = 1 when a Redisson client
--          made the lock (no epoch key: its release publishes only on Redisson's channel, so
--          the waiter is not registered and listens there) | {3, 0, 0} refused: a write
--          attempt by an owner holding the read lock (upgrade) | {-1, 0, 0} this request was
--          cancelled, or the hold it made is already gone
-- Records  "A<epoch>"
local name, replayKey, _, waiting, wake, prefix = unpack(KEYS)
local channel = ''
local read = ARGV[1] == 'read'
local leaseMs = tonumber(ARGV[2])
local owner = ARGV[3]
local windowMs = tonumber(ARGV[4])
local id = ARGV[5]
local waiter = ARGV[6]
-- @include lib/replay.lua
-- @include lib/hold.lua
-- @include lib/wake.lua
-- @include lib/rw.lua

local field = read and owner or owner .. ':write'
local seen = replay_get(id)
if seen then
  local made = string.sub(seen, 1, 1) == 'A' and string.sub(seen, 2)
  if made and made == rw_epoch() and redis.call('hexists', name, field) == 1 then
    return {1, tonumber(redis.call('hget', name, field)), tonumber(made) or 0}
  end
  return {-1, 0, 0}
end

local mode = redis.call('hget', name, 'mode')
if mode == 'read' and not read then
  -- Readers that died do not keep a writer out.
  local longest = rw_live()
  if longest == 0 then
    rw_delete()
    mode = false
  elseif redis.call('hexists', name, owner) == 1 then
    return {3, 0, 0}
  end
end
local e
if not mode then
  e = rw_new_epoch()
  redis.call('hset', name, 'mode', read and 'read' or 'write')
elseif (mode == 'read' and read) or (mode == 'write' and redis.call('hexists', name, owner .. ':write') == 1) then
  e = rw_epoch()
else
  if rw_epoch() == '' then
    return {0, redis.call('pttl', name), 1}
  end
  if waiter ~= '' then
    waiting_add(waiter, tonumber(ARGV[7]))
  end
  return {0, redis.call('pttl', name), 0}
end
if waiter ~= '' then
  waiting_remove(waiter)
end
local count = redis.call('hincrby', name, field, 1)
if read then
  redis.call('set', timeout_key(owner, count), '1', 'px', leaseMs)
end
rw_extend(leaseMs)
replay_set(id, 'A' .. e)
return {1, count, tonumber(e) or 0}
