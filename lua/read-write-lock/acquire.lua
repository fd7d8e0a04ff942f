-- Acquire (or re-enter) the read or the write lock of a read-write lock: Redisson
-- RedissonReadLock#tryLockInnerAsync and RedissonWriteLock#tryLockInnerAsync, replay-safe like
-- lua/lock/acquire.lua, with a TTL that is never shortened (Redisson's write re-entry adds the
-- lease to the TTL instead). Many readers or one writer; the writer may also take the read lock
-- (downgrade), never the reverse (an upgrade would wait for itself: it is refused). A writer
-- finding only readers that died (no live timeout key) takes the lock.
-- KEYS[1]  lock name: HASH (see lib/rw.lua)
-- KEYS[2]  replay records "edgelock_replay:{<name>}" (prefix: one STRING per request id)
-- KEYS[3]  unused (kept so that every script keeps its key positions)
-- KEYS[4]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[5]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[6]  timeout key prefix "{<name>}" (read holds' keys "{<name>}:<owner>:rwlock_timeout:<k>",
--          the epoch key "edgelock_epoch:{<name>}")
-- ARGV[1]  'read' | 'write'
-- ARGV[2]  leaseTime in ms
-- ARGV[3]  owner "<clientId>:<taskId>" (the writer's field is "<owner>:write")
-- ARGV[4]  replay window in ms
-- ARGV[5]  request id (32 hex characters; becomes the lease id)
-- ARGV[6]  waiter id of a call that blocks for a wake-up between attempts ('' = none)
-- ARGV[7]  with a waiter id: how long its registration lasts, in ms
-- ARGV[8]  '0' when the waiter cannot be registered yet (the first attempt of a wait), so an
--          acquiring attempt has no registration to end; anything else (or absent): it may be
-- Returns  {1, holdCount, epoch} acquired | {0, pttl, jvm} busy, jvm = 1 when a Redisson client
--          made the lock (no epoch key: its release publishes only on Redisson's channel, so
--          the waiter is not registered and listens there) | {3, 0, 0} refused: a write
--          attempt by an owner holding the read lock (upgrade) | {-1, 0, 0} this request was
--          cancelled, or the hold it made is already gone
-- Records  "A<epoch>" for a hold joining an incarnation, or creating one with a lease shorter
--          than the replay window; a lock it creates records itself (the epoch key names it,
--          lib/rw.lua). Any record found first (a cancel's "C"/"U", a release's "R<n>", "G")
--          makes this a no-op.
-- Billed   free lock: EVALSHA, EXISTS, HSET, SET (epoch key), PEXPIRE, and the read hold's
--          timeout key SET: read 6, write 5
local name, replayKey, _, waiting, wake, prefix = unpack(KEYS)
local channel = ''
local read = ARGV[1] == 'read'
local leaseMs = tonumber(ARGV[2])
local owner = ARGV[3]
local windowMs = tonumber(ARGV[4])
local id = ARGV[5]
local waiter = ARGV[6]
local registered = ARGV[8] ~= '0'
-- @include lib/rw.lua

local field = read and owner or owner .. ':write'
local record = replayKey .. ':' .. id

-- Creates the lock for this hold in a new incarnation named after this request; `flag` is '+'
-- when waiters may be registered. Returns the epoch. A lease shorter than the replay window may
-- expire, epoch key and all, while a copy of this request is still in flight: then a record
-- says what it did.
local function create(flag)
  local e = id_epoch(id)
  redis.call('hset', name, 'mode', ARGV[1], field, 1)
  if read then
    redis.call('set', timeout_key(owner, 1), '1', 'px', leaseMs)
  end
  redis.call('set', epochKey, id .. flag, 'px', leaseMs)
  redis.call('pexpire', name, leaseMs)
  if leaseMs < windowMs then
    replay_set(id, 'A' .. e)
  end
  return e
end

-- No lock, no incarnation lingering, no record of this request and nobody registered: one
-- EXISTS over the four keys.
if redis.call('exists', name, epochKey, record, waiting) == 0 then
  return {1, 1, tonumber(create('')) or 0}
end

local s = redis.call('hmget', name, 'mode', field, owner .. ':write', 'edgelock:epoch')
local mode, count = s[1], tonumber(s[2])
local v = redis.call('mget', epochKey, record)
local e, by, waiters = rw_parse(v[1], s[4])
if not mode then
  e = ''
end

local seen = v[2]
if seen then
  -- A replay of an applied acquire reports the hold it made instead of adding another, as long
  -- as that hold is still in this incarnation of the lock.
  local made = string.match(seen, '^A(.*)')
  if made and made == e and count then
    return {1, count, tonumber(made) or 0}
  end
  return {-1, 0, 0}
end
if by == id then
  -- A copy of the acquire that created this incarnation: the epoch key is its record.
  if mode and count then
    return {1, count, tonumber(e) or 0}
  end
  return {-1, 0, 0}
end

-- An epoch key left by an incarnation whose hash is gone (or about to go) stood for its
-- creator: what replaces or deletes it records that creator instead.
local lingering = v[1] and true
if mode == 'read' and not read then
  -- Readers that died do not keep a writer out.
  local longest = rw_live()
  if longest == 0 then
    rw_delete(by)
    mode = false
    lingering = false
  elseif redis.call('hexists', name, owner) == 1 then
    return {3, 0, 0}
  end
end
if not mode then
  if lingering then
    rw_gone(by)
  end
  if waiter ~= '' and registered then
    waiting_remove(waiter)
  end
  return {1, 1, tonumber(create(redis.call('exists', waiting) == 1 and '+' or '')) or 0}
end
if (mode == 'read' and read) or (mode == 'write' and s[3]) then
  if waiter ~= '' and registered then
    waiting_remove(waiter)
  end
  count = redis.call('hincrby', name, field, 1)
  if read then
    redis.call('set', timeout_key(owner, count), '1', 'px', leaseMs)
  end
  rw_extend(leaseMs)
  replay_set(id, 'A' .. e)
  return {1, count, tonumber(e) or 0}
end
if e == '' then
  return {0, redis.call('pttl', name), 1}
end
if waiter ~= '' then
  waiting_add(waiter, tonumber(ARGV[7]))
  if not waiters then
    -- Releases of this incarnation read the registry from now on.
    redis.call('append', epochKey, '+')
  end
end
return {0, redis.call('pttl', name), 0}
