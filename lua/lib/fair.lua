-- The fair lock's queue (Redisson RedissonFairLock's layout) and its hand-off. Included by the
-- fair-lock scripts after lib/hold.lua, which define first:
--   name      the lock HASH (KEYS)
--   queue     "redisson_lock_queue:{<name>}"   LIST of waiting owners, FIFO (KEYS)
--   slots     "redisson_lock_timeout:{<name>}" ZSET owner -> server-time ms its slot lapses (KEYS)
--   waiters   "edgelock_waiters:{<name>}"      HASH of the queued owners that are ours -> the
--             server-time ms their slot lapses (KEYS)
--   channel   "redisson_lock__channel:{<name>}" prefix of Redisson's per-waiter channels (KEYS)
--   claimMs   how long a hand-off waits for its waiter to confirm, in ms (ARGV)
-- Our waiters block on their own wake list "edgelock_wake:{<name>}:<owner>" (same hash slot as
-- the name). Redisson waiters in the same queue are woken on their channel instead, and take the
-- lock with their own script.
local GRANT = 'edgelock:grant'

local function now_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function wake_key(owner)
  return 'edgelock_wake:{' .. name .. '}:' .. owner
end

-- Takes `owner` out of the queue, wherever it stands.
local function leave(owner)
  redis.call('lrem', queue, 0, owner)
  redis.call('zrem', slots, owner)
  redis.call('hdel', waiters, owner)
  redis.call('del', wake_key(owner))
end

-- When a waiter's slot lapses (false: it has none). Ours is read from the registry: Redisson's
-- own acquire lowers every ZSET score by its wait, which must not make our live waiters look
-- dead to us.
local function lapses_at(owner)
  local at = redis.call('hget', waiters, owner) or redis.call('zscore', slots, owner)
  return at and tonumber(at)
end

-- Drops dead waiters (slot lapsed, or no slot) from the head of the queue.
local function prune(now)
  while true do
    local head = redis.call('lindex', queue, 0)
    if not head then
      return
    end
    local lapses = lapses_at(head)
    if lapses and lapses > now then
      return
    end
    leave(head)
  end
end

-- Queues `owner` at the back, or keeps its place; either way its slot lasts until at least
-- `lapses` (never shortened, so a late request cannot cut a renewed slot short). The queue keys
-- then live until the last slot lapses (Redisson's scripts set no TTL on them): once every
-- waiter is dead and nobody touches the lock again, nothing is left.
local function queue_up(owner, now, lapses)
  if redis.call('zscore', slots, owner) then
    local had = tonumber(redis.call('hget', waiters, owner) or '0')
    if had > lapses then
      lapses = had
    end
  else
    redis.call('rpush', queue, owner)
    -- A token left from an earlier wait must not end this one early.
    redis.call('del', wake_key(owner))
  end
  redis.call('zadd', slots, lapses, owner)
  redis.call('hset', waiters, owner, lapses)
  local last = tonumber(redis.call('zrange', slots, -1, -1, 'withscores')[2])
  if last > lapses then
    lapses = last
  end
  local ms = math.max(1, math.ceil(lapses - now))
  for _, key in ipairs({queue, slots, waiters}) do
    local pttl = redis.call('pttl', key)
    if pttl == -1 or (pttl >= 0 and pttl < ms) then
      redis.call('pexpire', key, ms)
    end
  end
end

-- The lock is free: give it to the first live waiter. One of ours gets the lock with a claim
-- window (it confirms with its acquire script, which sets its lease) and a wake token; a
-- Redisson waiter is woken on its channel and takes the lock itself.
local function hand_off(now)
  prune(now)
  local head = redis.call('lindex', queue, 0)
  if not head then
    return
  end
  if redis.call('hexists', waiters, head) == 0 then
    redis.call('publish', channel .. ':' .. head, 0)
    return
  end
  leave(head)
  redis.call('hset', name, head, 1, GRANT, head)
  new_epoch()
  redis.call('pexpire', name, claimMs)
  local wake = wake_key(head)
  redis.call('rpush', wake, 1)
  redis.call('pexpire', wake, claimMs)
end
