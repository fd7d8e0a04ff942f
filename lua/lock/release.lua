-- Release one hold of a reentrant lock: Redisson RedissonLock#unlockInnerAsync with a replay
-- record, so a replayed release reports the first result and never decrements twice. A lease
-- passes the epoch of its acquire: once the lock it held has expired, a newer hold of the same
-- owner is left alone. Freeing the lock hands it to the first registered waiter that asked for
-- a grant, or wakes the first that did not (lib/wake.lua, hand_off_one). With a
-- seventh key it completes an idempotency key: the completion marker
-- is recorded in the same step, so no claim can slip in between the release and the record.
-- KEYS[1]  lock name (HASH)
-- KEYS[2]  replay records "edgelock_replay:{<name>}"
-- KEYS[3]  unused (kept so that every script keeps its key positions)
-- KEYS[4]  Redisson unlock channel "redisson_lock__channel:{<name>}" (wakes JVM waiters)
-- KEYS[5]  registered waiters "edgelock_waiting:{<name>}" (ZSET)
-- KEYS[6]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[7]  optional completion marker "edgelock_done:{<name>}": STRING "1"
-- ARGV[1]  owner field
-- ARGV[2]  leaseTime in ms to restore on a partial release, never shortening (0 = keep the TTL)
-- ARGV[3]  replay window in ms
-- ARGV[4]  request id (the lease id, or a fresh one for unlock(owner))
-- ARGV[5]  epoch of the hold being released, decimal ("0" = any hold of the owner)
-- ARGV[6]  with KEYS[7]: completion TTL in ms (PX of the marker; an existing marker is kept)
-- ARGV[7]  claim window in ms of a hand-off to a waiter
-- Returns  1 released (last hold gone) | 2 still held (count > 0) | 0 expired (no key, or only
--          a newer incarnation) | 3 not owner (held by someone else)
-- Records  "R<result>" for results 1 and 2 (lib/release.lua says when)
-- Billed   freeing the lock with nobody waiting: EVALSHA, HMGET, DEL, PUBLISH, SET (5)
-- ARGV[1..5] are bound by lib/release-args.lua, shared with lua/fair-lock/release.lua.

-- The common path first, before anything is defined (lua/lock/acquire.lua says why): the
-- owner's only hold, in the incarnation the lease names, with no waiter to hand the lock to (no
-- WAITERS field) and no completion marker to record. This is lib/release-free.lua's
-- release_read, release_plain and release_last spelled out for that case, with KEYS and ARGV as
-- they are and lib/hold-fields.lua's field names written out.
local read
if not KEYS[7] then
  read = redis.call('hmget', KEYS[1], ARGV[1], 'edgelock:epoch', 'edgelock:by',
    'edgelock:partial', 'edgelock:waiters')
  if read[1] == '1' and not read[4] and not read[5] and ARGV[5] == read[2] then
    redis.call('del', KEYS[1])
    redis.call('set', KEYS[2] .. ':' .. ARGV[4], 'R1', 'px', ARGV[3])
    local by = read[3]
    if by and by ~= ARGV[4] then
      redis.call('set', KEYS[2] .. ':' .. by, 'G', 'px', ARGV[3])
    end
    redis.call('publish', KEYS[4], 0)
    return 1
  end
end

local name, replayKey, _, channel, waiting, wake, done = unpack(KEYS)
-- @include lib/release-args.lua
-- @include lib/release-free.lua

if done then
  -- The work finished even if the lease did not survive it: record it whatever the lock says.
  redis.call('set', done, '1', 'px', tonumber(ARGV[6]), 'nx')
end

-- The HASH as read above, or now, after the completion marker (which reads nothing of it).
local s = read or release_read()

-- @include lib/release.lua
-- @include lib/wake.lua

return release_hold(function(waited)
  return waited and hand_off_one(tonumber(ARGV[7]), waited)
end, nil, s)
