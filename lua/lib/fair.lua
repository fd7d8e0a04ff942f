-- The fair lock's queue (Redisson RedissonFairLock's layout) and its hand-off. Included by the
-- fair-lock scripts after lib/hold.lua, which define first:
--   name      the lock HASH (KEYS)
--   queue     "redisson_lock_queue:{<name>}"   LIST of waiting owners, FIFO (KEYS)
--   slots     "redisson_lock_timeout:{<name>}" ZSET owner -> server-time ms its slot lapses (KEYS)
--   waiters   "edgelock_waiters:{<name>}"      HASH owner -> waiter id, of our queued owners (KEYS)
--   channel   "redisson_lock__channel:{<name>}" prefix of Redisson's per-waiter channels (KEYS)
--   claimMs   how long a hand-off waits for its waiter to confirm, in ms (ARGV)
-- Our waiter "<client>:<wait>" listens on its client's wake channel "edgelock_wake:{<name>}:<client>"
-- (lib/wake.lua). Redisson waiters in the same queue are woken on their channel instead, and
-- take the lock with their own script.
local GRANT = 'edgelock:grant'

local function now_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function fair_wake_channel(waiter)
  return 'edgelock_wake:{' .. name .. '}:' .. (string.match(waiter, '^([^:]*):') or waiter)
end

-- Takes `owner` out of the queue, wherever it stands.
local function leave(owner)
  redis.call('lrem', queue, 0, owner)
  redis.call('zrem', slots, owner)
  redis.call('hdel', waiters, owner)
end

-- Drops dead waiters (slot lapsed, or no slot) from the head of the queue.
local function prune(now)
  while true do
    local head = redis.call('lindex', queue, 0)
    if not head then
      return
    end
    local lapses = tonumber(redis.call('zscore', slots, head))
    if lapses and lapses > now then
      return
    end
    leave(head)
  end
end

-- Queues `owner` (waiter id `waiter`) at the back, or keeps its place; either way its slot
-- lasts until at least `lapses` (never shortened: a late request cannot cut a renewed slot
-- short; it also lifts a score a Redisson acquire lowered by its wait). The queue keys then live
-- until the last slot lapses (Redisson's scripts set no TTL on them), so once every waiter is
-- dead and nobody touches the lock again, nothing is left.
local function queue_up(owner, waiter, now, lapses)
  local had = tonumber(redis.call('zscore', slots, owner))
  if had then
    if had > lapses then
      lapses = had
    end
  else
    redis.call('rpush', queue, owner)
  end
  redis.call('zadd', slots, lapses, owner)
  redis.call('hset', waiters, owner, waiter)
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

-- The lock is free: give it to the first live waiter. One of ours gets the lock for a claim
-- window, marked with its waiter id (GRANT), and is sent "<waiter>|<epoch>": it holds the lock
-- from then on, and makes the TTL its lease with its first renewal (or its next attempt confirms
-- the grant). A Redisson waiter is woken on its channel and takes the lock itself.
local function hand_off(now)
  prune(now)
  local head = redis.call('lindex', queue, 0)
  if not head then
    return
  end
  local waiter = redis.call('hget', waiters, head)
  if not waiter then
    redis.call('publish', channel .. ':' .. head, 0)
    return
  end
  leave(head)
  redis.call('hset', name, head, 1, GRANT, waiter)
  local e = new_epoch()
  redis.call('pexpire', name, claimMs)
  redis.call('publish', fair_wake_channel(waiter), waiter .. '|' .. e)
end
