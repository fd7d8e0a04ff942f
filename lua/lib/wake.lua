-- Wake-ups for waiters, over pub/sub. Nothing is granted: a message only tells a waiting call
-- to attempt again now. Included by scripts, which define first:
--   waiting  "edgelock_waiting:{<name>}"  ZSET waiter id -> server-time ms its registration
--            lapses (KEYS); a waiter registers with each busy attempt and comes back well before
--   wake     "edgelock_wake:{<name>}"     prefix of the clients' wake channels (KEYS, for the
--            hash slot): waiter "<client>:<wait>" listens on "edgelock_wake:{<name>}:<client>"
-- A woken waiter leaves the ZSET (its next busy attempt registers it again), so each release
-- wakes waiters that are still waiting. A PUBLISH that no subscriber received (the waiter's
-- client died, or its stream was closed) wakes the next waiter instead.

local function wake_now()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The channel waiter `id` listens on.
local function wake_channel(id)
  return wake .. ':' .. (string.match(id, '^([^:]*):') or id)
end

-- Registers (or refreshes) waiter `id` for `ms`. The key lives as long as its last registration.
local function waiting_add(id, ms)
  redis.call('zadd', waiting, wake_now() + ms, id)
  if redis.call('pttl', waiting) < ms then
    redis.call('pexpire', waiting, ms)
  end
end

-- Unregisters waiter `id` (it acquired, gave up or was aborted).
local function waiting_remove(id)
  redis.call('zrem', waiting, id)
end

-- Wakes up to `n` live waiters in registration order (earliest lapse first), each with a
-- message that only it reads, and unregisters each waiter it tried.
local function wake_up_to(n)
  local now = wake_now()
  redis.call('zremrangebyscore', waiting, '-inf', now)
  local woken = 0
  while woken < n do
    local head = redis.call('zrange', waiting, 0, 0)[1]
    if not head then
      return
    end
    redis.call('zrem', waiting, head)
    if redis.call('publish', wake_channel(head), head) > 0 then
      woken = woken + 1
    end
  end
end

-- After the lock was freed: the next live waiter.
local function wake_one()
  wake_up_to(1)
end

-- After the lock was freed for more than one waiter (a writer left: every reader may get in,
-- a latch opened): every live waiter.
local function wake_all()
  wake_up_to(math.huge)
end

-- After n units were freed (a semaphore's permits): up to n live waiters. A woken waiter that
-- cannot use what it finds registers again.
local function wake_n(n)
  wake_up_to(n)
end
