-- Helpers for a lock HASH (Redisson layout: field = owner, value = hold count). Included by
-- scripts, which define first:
--   name  the lock name (KEYS)
-- Provides EPOCH, extend(ms), epoch(), new_epoch(); includes lib/clock.lua.
-- The HASH also carries one field of ours, EPOCH: the id of this incarnation of the lock (set
-- by the acquire that creates the key, gone with the key), so a late cancel or a stale lease
-- can tell its hold from a newer hold of the same owner. Redisson's scripts only read and write
-- their own owner fields, so they see a lock held by edgelock as held, as before. (The
-- read-write lock keeps its epoch outside the HASH instead: lib/rw.lua.)
-- @include lib/clock.lua
local EPOCH = 'edgelock:epoch'

-- Sets the lock's TTL to ms unless it already has more left: a TTL is never shortened, so no
-- lease of the owner ever believes it holds longer than Redis keeps the lock.
local function extend(ms)
  if redis.call('pttl', name) < ms then
    redis.call('pexpire', name, ms)
  end
end

-- The incarnation of the lock as a decimal string ('' when it has none: absent, or created by
-- a Redisson client). Kept as a string: Lua's own number formatting would round it.
local function epoch()
  return redis.call('hget', name, EPOCH) or ''
end

-- Starts a new incarnation: server time in microseconds, a safe integer unique per name in
-- practice. Returns it as a decimal string.
local function new_epoch()
  local e = clock_us()
  redis.call('hset', name, EPOCH, e)
  return e
end
