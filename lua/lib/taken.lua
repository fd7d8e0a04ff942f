-- Permits edgelock callers took and have not given back (trySetPermits and addPermits do not
-- count). Included by semaphore scripts, which define first:
--   takenKey  "edgelock_taken:{<name>}" (STRING; KEYS), gone at 0
-- Releasing what one took is always legitimate, whatever a Redisson client did to the
-- semaphore meanwhile (addPermits, reducePermits, delete + trySetPermits): the over-release
-- bound lets such a release through, so it needs its own count, outside the permits set.

local function taken_get()
  return tonumber(redis.call('get', takenKey)) or 0
end

local function taken_add(n)
  if n > 0 then
    redis.call('incrby', takenKey, n)
  end
end

-- Gives `n` back, never below 0 (permits a Redisson client released are not counted).
local function taken_sub(n)
  local left = taken_get() - n
  if left > 0 then
    redis.call('set', takenKey, left)
  else
    redis.call('del', takenKey)
  end
end
