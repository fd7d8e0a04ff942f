-- Helpers of the fair lock: Redisson RedissonFairLock's wait queue, plus the hand-off by which a
-- releasing script grants the lock to the first waiter and wakes it. Included after
-- lib/hold.lua (for extend and new_epoch) by scripts, which define first:
--   name        the lock HASH (KEYS)
--   channel     "redisson_lock__channel:{<name>}" (KEYS); a Redisson fair waiter listens on
--               channel .. ':' .. its owner
--   queue       "redisson_lock_queue:{<name>}": LIST of waiting owners, first in line first (KEYS)
--   zset        "redisson_lock_timeout:{<name>}": ZSET owner -> slot deadline, epoch ms (KEYS)
--   waiters     "edgelock_waiters:{<name>}": HASH owner -> slot deadline (server ms) of the
--               waiters that are edgelock's; the others are Redisson's (KEYS)
--   wakePrefix  "edgelock_wake:{<name>}": a waiter's wake LIST is wakePrefix .. ':' .. owner (KEYS;
--               built here, in the slot of {<name>} like every other key of the lock)
--   claimMs     claim window in ms: how long a granted waiter has to confirm (ARGV)
-- Times are Redis server time: edge clocks disagree, the server's is the one all clients share.

-- Field of the lock HASH present while a grant is unconfirmed; its value is '@' .. owner (not a
-- hold count, so the holders read skips it).
local GRANT = 'edgelock:grant'

local function now_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function wake_key(owner)
  return wakePrefix .. ':' .. owner
end

local function granted_to(owner)
  return redis.call('hget', name, GRANT) == '@' .. owner
end

-- A waiter's slot deadline. Ours comes from the registry: Redisson's own scripts lower every
-- ZSET score when one of its clients acquires, which must not make our live waiters look dead.
-- Returns false for an entry with no deadline at all (the queue and ZSET disagree).
local function deadline_of(owner)
  local d = redis.call('hget', waiters, owner) or redis.call('zscore', zset, owner)
  return d and tonumber(d)
end

local function forget(owner)
  redis.call('zrem', zset, owner)
  redis.call('hdel', waiters, owner)
  redis.call('del', wake_key(owner))
end

-- Leaves the queue from wherever the owner stands in it.
local function leave(owner)
  redis.call('lrem', queue, 0, owner)
  forget(owner)
end

-- Drops waiters whose slot has lapsed from the front of the queue, as Redisson does: a dead
-- waiter further back is dropped when it reaches the front, so the first live one is served.
local function prune(now)
  while true do
    local head = redis.call('lindex', queue, 0)
    if not head then
      return
    end
    local d = deadline_of(head)
    if d and d > now then
      return
    end
    redis.call('lpop', queue)
    forget(head)
  end
end

-- The lock is free: offer it to the first live waiter. One of ours is granted it at once (hold
-- count 1 in a new incarnation, a TTL of one claim window, a wake token on its own list), so
-- it needs a single request to confirm; a grant it never confirms lapses with the key and the
-- next toucher passes the lock on. A Redisson waiter is told on its own channel and takes the
-- lock with its own script. Returns the owner granted, or false.
local function hand_off(now)
  prune(now)
  local head = redis.call('lindex', queue, 0)
  if not head then
    return false
  end
  if redis.call('hexists', waiters, head) == 0 then
    redis.call('publish', channel .. ':' .. head, 0)
    return false
  end
  redis.call('lpop', queue)
  forget(head)
  redis.call('hset', name, head, 1, GRANT, '@' .. head)
  local e = new_epoch()
  redis.call('pexpire', name, claimMs)
  local wake = wake_key(head)
  redis.call('rpush', wake, e)
  redis.call('pexpire', wake, claimMs)
  return head
end

-- Keeps the queue, ZSET and registry at least until deadline and until the last ZSET score
-- (a Redisson waiter's), never shortening: they outlive no waiter by more than its slot, so
-- dead waiters leave nothing behind, while Redisson's own scripts set no TTL on them.
local function keep_queue(now, deadline)
  local last = redis.call('zrange', zset, -1, -1, 'withscores')[2]
  if last and tonumber(last) > deadline then
    deadline = tonumber(last)
  end
  local ms = math.max(1, math.ceil(deadline - now))
  for _, key in ipairs({queue, zset, waiters}) do
    local pttl = redis.call('pttl', key)
    if pttl == -1 or (pttl >= 0 and pttl < ms) then
      redis.call('pexpire', key, ms)
    end
  end
end

-- How long a waiter may wait before the lock can change hands without a wake token: the
-- holder's PTTL (-1: no TTL), or while the lock is free, the slot left to the waiter in front.
local function wait_hint(now)
  local pttl = redis.call('pttl', name)
  if pttl ~= -2 then
    return pttl
  end
  local head = redis.call('lindex', queue, 0)
  local d = head and deadline_of(head)
  if d then
    return math.max(0, d - now)
  end
  return 0
end

-- {0, position in the queue (1 = first, 0 = not queued), wait hint in ms}
local function waiting(owner, now)
  local at = redis.call('lpos', queue, owner)
  return {0, at and at + 1 or 0, wait_hint(now)}
end

-- Puts the owner at the back of the queue, or keeps its place; either way its slot lasts at
-- least until deadline (never shortened, so a late request cannot cut a renewed slot short).
local function queue_up(owner, now, deadline)
  if redis.call('zscore', zset, owner) then
    local d = tonumber(redis.call('hget', waiters, owner) or '0')
    if d > deadline then
      deadline = d
    end
  else
    redis.call('rpush', queue, owner)
    -- A token left from an earlier wait must not end this one early.
    redis.call('del', wake_key(owner))
  end
  redis.call('zadd', zset, deadline, owner)
  redis.call('hset', waiters, owner, deadline)
  keep_queue(now, deadline)
end
