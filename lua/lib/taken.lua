-- The semaphore's own count, one STRING "edgelock_taken:{<name>}" (takenKey, KEYS, defined by the
-- including script, with `waiting` for the waiter registry, lib/wake.lua):
--   permits edgelock callers took and have not given back (trySetPermits and addPermits do not
--   count), plus TAKEN_WAITERS while a waiter may be registered in `waiting`.
-- Releasing what one took is always legitimate, whatever a Redisson client did to the semaphore
-- meanwhile (addPermits, reducePermits, delete + trySetPermits): the over-release bound lets such
-- a release through, so it needs its own count, outside the permits set.
-- Why the waiter mark lives in the count: a release must update the count anyway, and one DECRBY
-- answers both the count and whether anyone may be waiting, so a release with nobody registered
-- never touches the registry (one call instead of a GET of a separate mark or a ZRANGE). The mark
-- is set by the busy attempt that registers a waiter (in the same script) and cleared only by a
-- script that finds the registry empty, so a registered waiter is never missed; a stale mark
-- costs one ZRANGE, once. The count stays at "0" (a documented persistent key, deleted by
-- edgelock's delete) rather than costing a DEL on every release that empties it.
-- Provides TAKEN_WAITERS, taken_decode(raw), taken_write(taken, waiters), taken_get(),
-- taken_add(n), taken_waiting().

-- 10^15: far above any count (permits are below 2^31 a call), below 2^53 (exact in Lua), and a
-- flagged value still reads as the count in decimal ("1000000000000002": 2 taken, waiters).
local TAKEN_WAITERS = 1e15

-- The count (never below 0) and whether the waiter mark is set, from the STRING's value (nil,
-- false or a number string; a DECRBY answer may be up to 2^31 below either range).
local function taken_decode(raw)
  local v = tonumber(raw) or 0
  if v >= TAKEN_WAITERS / 2 then
    return v - TAKEN_WAITERS, true
  end
  return v, false
end

-- Stores the count (0 at least) and the mark; gone when both are 0.
local function taken_write(taken, waiters)
  local v = math.max(taken, 0) + (waiters and TAKEN_WAITERS or 0)
  if v == 0 then
    redis.call('del', takenKey)
  else
    redis.call('set', takenKey, string.format('%.0f', v))
  end
end

local function taken_get()
  return taken_decode(redis.call('get', takenKey))
end

local function taken_add(n)
  if n > 0 then
    redis.call('incrby', takenKey, n)
  end
end

-- Whether anyone is still registered (lapsed or not): the mark a script writes back with the
-- count after its wake-ups, so that a mark nobody needs any more costs one ZRANGE, once.
local function taken_waiting()
  return redis.call('zrange', waiting, 0, 0)[1] ~= nil
end
