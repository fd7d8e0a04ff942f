-- Wake-ups for waiters, instead of pub/sub. Nothing is granted: a token only tells a blocked
-- waiter to attempt again now. Included by scripts, which define first:
--   waiting  "edgelock_waiting:{<name>}"  ZSET waiter id -> server-time ms its registration
--            lapses (KEYS); a waiter registers with each busy attempt and comes back well before
--   wake     "edgelock_wake:{<name>}"     prefix of the waiters' own lists (KEYS): waiter <id>
--            blocks (BLPOP) on "edgelock_wake:{<name>}:<id>", same hash slot
-- Each waiter has its own list, so a token reaches the waiter it is meant for: a BLPOP left
-- behind by a waiter that gave up (its HTTP request may stay open until its timeout) blocks on a
-- list nobody pushes to any more, instead of taking a token from a live waiter.

local function wake_now()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function wake_key(id)
  return wake .. ':' .. id
end

-- Registers (or refreshes) waiter `id` for `ms`. The key lives as long as its last registration.
local function waiting_add(id, ms)
  redis.call('zadd', waiting, wake_now() + ms, id)
  if redis.call('pttl', waiting) < ms then
    redis.call('pexpire', waiting, ms)
  end
end

-- Unregisters waiter `id` (it acquired, gave up or was aborted), with any token left for it.
local function waiting_remove(id)
  redis.call('zrem', waiting, id)
  redis.call('del', wake_key(id))
end

-- Pushes a token to up to `n` live waiters that have none waiting, in registration order
-- (earliest lapse first). Waiters that already have a token count towards `n` when `counted`.
local function wake_up_to(n, counted)
  local now = wake_now()
  redis.call('zremrangebyscore', waiting, '-inf', now)
  local woken = 0
  if n <= 0 then
    return
  end
  local live = redis.call('zrange', waiting, 0, -1, 'withscores')
  for i = 1, #live, 2 do
    if woken >= n then
      return
    end
    local key = wake_key(live[i])
    if redis.call('exists', key) == 0 then
      redis.call('rpush', key, '1')
      redis.call('pexpire', key, math.max(tonumber(live[i + 1]) - now, 1))
      woken = woken + 1
    elseif counted then
      woken = woken + 1
    end
  end
end

-- After the lock was freed: a token for the next waiter that has none waiting.
local function wake_one()
  wake_up_to(1, false)
end

-- After the lock was freed for more than one waiter (a writer left: every reader may get in,
-- a latch opened): a token for each live waiter that has none waiting.
local function wake_all()
  wake_up_to(math.huge, false)
end

-- After n units were freed (a semaphore's permits): tokens for up to n live waiters, those with
-- a token already waiting included. A woken waiter that cannot use what it finds registers again.
local function wake_n(n)
  wake_up_to(n, true)
end
