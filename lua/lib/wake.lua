-- Wake-ups for a reentrant lock's waiters, instead of pub/sub. The lock stays non-fair: there
-- is no queue and no grant, only a token that tells one blocked waiter to attempt again now.
-- Included by scripts, which define first:
--   waiting  "edgelock_waiting:{<name>}"  ZSET waiter id -> server-time ms its registration
--            lapses (KEYS); a waiter registers with each busy attempt and comes back well before
--   wake     "edgelock_wake:{<name>}"     LIST the waiters block on with BLPOP (KEYS)
-- Redis serves the waiter blocked longest first, so a release wakes one waiter, not all of them.

local function wake_now()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Registers (or refreshes) waiter `id` for `ms`. The key lives as long as its last registration.
local function waiting_add(id, ms)
  redis.call('zadd', waiting, wake_now() + ms, id)
  if redis.call('pttl', waiting) < ms then
    redis.call('pexpire', waiting, ms)
  end
end

-- Unregisters waiter `id` (it acquired, gave up or was aborted). No more tokens wait than live
-- waiters, so the next waiter is not woken for nothing, and none once the last waiter is gone.
local function waiting_remove(id)
  redis.call('zrem', waiting, id)
  local live = redis.call('zcard', waiting)
  if live == 0 then
    redis.call('del', wake)
  elseif redis.call('llen', wake) > live then
    redis.call('ltrim', wake, 0, live - 1)
  end
end

-- After the lock was freed: one token for the next waiter, unless no live waiter is registered
-- or every live waiter already has a token waiting (a waiter between two BLPOPs finds it then).
local function wake_one()
  redis.call('zremrangebyscore', waiting, '-inf', wake_now())
  local live = redis.call('zcard', waiting)
  if live > 0 and redis.call('llen', wake) < live then
    redis.call('rpush', wake, '1')
    redis.call('pexpire', wake, math.max(redis.call('pttl', waiting), 1))
  end
end

-- After the lock was freed for more than one waiter (a writer left: every reader may get in):
-- a token for each live waiter that has none waiting.
local function wake_all()
  redis.call('zremrangebyscore', waiting, '-inf', wake_now())
  local missing = redis.call('zcard', waiting) - redis.call('llen', wake)
  for _ = 1, missing do
    redis.call('rpush', wake, '1')
  end
  if missing > 0 then
    redis.call('pexpire', wake, math.max(redis.call('pttl', waiting), 1))
  end
end
