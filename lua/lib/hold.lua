-- Helpers for a lock HASH (Redisson layout: field = owner, value = hold count). Included by
-- scripts, which define first:
--   name  the lock name (KEYS)
-- Provides extend(ms), epoch(), new_epoch(), and through lib/hold-fields.lua (the field names
-- below) EPOCH, GRANT, BY, PARTIAL, TOKEN, WAITERS and id_epoch(id); includes that and
-- lib/clock.lua.
-- The HASH also carries fields of ours, gone with the key, so that the state a replay needs
-- lives with the hold it describes and the common path reads it in the same HMGET:
--   EPOCH    the id of this incarnation of the lock (set by what creates the key), so a late
--            cancel or a stale lease can tell its hold from a newer hold of the same owner
--   GRANT    the waiter a release handed the lock to, until it confirms (lib/wake.lua)
--   BY       the request id of the acquire that created the key: that acquire's replay record
--   PARTIAL  '1' once a release left holds behind (its replay record is a key of its own)
--   TOKEN    the fencing token the creating acquire granted (fenced locks)
--   WAITERS  set once a waiter registered during this incarnation, or it began while waiters
--            were registered (lib/wake.lua): without it, a release that frees the lock has
--            nobody to wake and does not read the registry. Its value is the server time in ms
--            until which the registry is known to live (its TTL reaches at least that far), or 1
--            when that is not known: a registration that ends before it sets no TTL, and a
--            hand-off carries it into the next incarnation (lib/reentrant.lua hold_register)
-- Redisson's scripts only read and write their own owner fields, so they see a lock held by
-- edgelock as held, as before. (The read-write lock keeps its epoch outside the HASH instead:
-- lib/rw.lua.)
-- @include lib/hold-fields.lua
-- @include lib/clock.lua

-- Sets the lock's TTL to ms unless it already has more left (PEXPIRE GT: one call when the key
-- has a TTL): a TTL is never shortened, so no lease of the owner ever believes it holds longer
-- than Redis keeps the lock. GT leaves a key without a TTL as it is (it counts as infinite), so
-- a key just created gets its TTL set outright (two calls more; a script that knows it created
-- the key calls PEXPIRE itself).
local function extend(ms)
  if redis.call('pexpire', name, ms, 'gt') == 0 and redis.call('pttl', name) == -1 then
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
