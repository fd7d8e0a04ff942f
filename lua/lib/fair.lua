-- The fair lock's queue (Redisson RedissonFairLock's layout) and its hand-off. Included by the
-- fair-lock scripts, which define first:
--   name      the lock HASH (KEYS)
--   queue     "redisson_lock_queue:{<name>}"   LIST of waiting owners, FIFO (KEYS)
--   slots     "redisson_lock_timeout:{<name>}" ZSET owner -> server-time ms its slot lapses (KEYS)
--   waiters   "edgelock_waiters:{<name>}"      HASH owner -> "<waiter id>:<ms its slot lapses>"
--             of our queued owners (KEYS; a bare waiter id: the slot is its ZSET score)
--   channel   "redisson_lock__channel:{<name>}" prefix of Redisson's per-waiter channels (KEYS)
--   claimMs   how long a hand-off waits for its waiter to confirm, in ms (ARGV)
-- Our waiter "<client>:<wait>" listens on its client's wake channel "edgelock_wake:{<name>}:<client>"
-- (lib/channel.lua: a digest of the name for a name a REST path cannot carry). Redisson waiters in the same queue are woken on their channel instead, and
-- take the lock with their own script.
-- Provides fair_wake_channel, leave, waiter_of, alive, first_live, queue_up, fair_notify_first,
-- hand_off;
-- includes lib/hold.lua (GRANT, EPOCH, and the clock with it) and lib/channel.lua.
-- @include lib/hold.lua
-- @include lib/channel.lua

-- Redisson's default fairLockWaitTimeout (Config#fairLockWaitTimeout, 5 minutes). Every
-- Redisson acquire that takes the lock from the queue lowers every queued score by its wait
-- ("everybody moves up one slot"): a waiter's score there must therefore count one such wait
-- per waiter ahead of it, or a live waiter of ours would look dead to Redisson and be dropped.
local REDISSON_WAIT = 300000

local function fair_wake_channel(waiter)
  return wake_channel_of(name, waiter)
end

-- Takes `owner` out of the queue, wherever it stands.
local function leave(owner)
  redis.call('lrem', queue, 0, owner)
  redis.call('zrem', slots, owner)
  redis.call('hdel', waiters, owner)
end

-- Our waiter `owner`: its waiter id and when its slot lapses (nil when not ours; lapses nil
-- when not recorded: the ZSET score counts).
local function waiter_of(owner)
  local v = redis.call('hget', waiters, owner)
  if not v then
    return nil, nil
  end
  local id, lapses = string.match(v, '^(.*):(%d+)$')
  if id then
    return id, tonumber(lapses)
  end
  return v, nil
end

-- Whether the waiter `owner` is alive: ours by the slot we recorded (Redisson's scripts lower
-- the ZSET scores), a Redisson waiter by its ZSET score.
local function alive(owner, now)
  local _, lapses = waiter_of(owner)
  if not lapses then
    lapses = tonumber(redis.call('zscore', slots, owner))
  end
  return lapses ~= nil and lapses > now
end

-- The first live waiter, after dropping dead ones (slot lapsed, or no slot) from the head of the
-- queue; nil when nobody is queued. An empty queue costs one LINDEX and no clock: the server time
-- is read only once there is a waiter to judge.
local function first_live()
  while true do
    local head = redis.call('lindex', queue, 0)
    if not head then
      return nil
    end
    if alive(head, clock_ms()) then
      return head
    end
    leave(head)
  end
end

-- Queues `owner` (waiter id `waiter`) at the back, or keeps its place; either way its slot
-- lasts until at least `lapses` (never shortened: a late request cannot cut a renewed slot
-- short). Its score in Redisson's ZSET is that slot plus one Redisson wait per waiter ahead
-- now, so Redisson acquires that take the lock ahead of it, each lowering it by a wait and
-- moving it up one place, leave it live until its turn; and once it has moved up without them
-- (edgelock's hand-offs lower no score), its next attempt brings the score down to match, so
-- Redisson's scripts also skip it soon after it dies. The queue keys then live until the last score lapses
-- (Redisson's scripts set no TTL on them), so once every waiter is dead and nobody touches the
-- lock again, nothing is left.
local function queue_up(owner, waiter, now, lapses)
  local _, recorded = waiter_of(owner)
  if recorded and recorded > lapses then
    lapses = recorded
  end
  local pos = redis.call('lpos', queue, owner)
  if not pos then
    pos = redis.call('rpush', queue, owner) - 1
  end
  redis.call('zadd', slots, lapses + pos * REDISSON_WAIT, owner)
  redis.call('hset', waiters, owner, waiter .. ':' .. lapses)
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

-- The lock changed hands (handed to the first waiter, or taken while others queue) and now
-- expires at `at` (server ms): tells our first queued waiter that it is first, with
-- "<id>|@<at>", so that its wait is back by that expiry without a request (lib/wake.lua,
-- notify_first, says why). When nobody hears that (its client is gone, or it polls: a poller
-- comes back by its own backoff), the second is told to be back a claim window later, in case
-- the first never comes. A Redisson waiter is not told: its queue timeout bounds its wait.
-- Billed   LRANGE, HGET, PUBLISH (+ HGET, PUBLISH when nobody heard the first)
local function fair_notify_first(at)
  for i, owner in ipairs(redis.call('lrange', queue, 0, 1)) do
    local id = waiter_of(owner)
    if not id or redis.call('publish', fair_wake_channel(id), id .. '|@' .. (at + (i - 1) * claimMs)) > 0 then
      return
    end
  end
end

-- The lock is free: give it to the first live waiter (`head` when the caller already found it with
-- first_live). One of ours gets the lock for a claim window, marked with its waiter id (GRANT),
-- and is sent "<waiter>|<epoch>": it holds the lock from then on, and makes the TTL its lease with
-- its first renewal (or its next attempt confirms the grant). When nobody heard that message,
-- the next live waiter is woken too. A Redisson waiter is woken on its
-- channel and takes the lock itself. Nobody queued: one LINDEX, nothing else. With `heard`, a
-- hand-off nobody hears is not made: it returns false and changes nothing (the caller takes the
-- lock itself); otherwise it returns true once the lock is handed (or told to a Redisson waiter).
local function hand_off(head, heard)
  head = head or first_live()
  if not head then
    return
  end
  local waiter = waiter_of(head)
  if not waiter then
    redis.call('publish', channel .. ':' .. head, 0)
    return true
  end
  -- A new incarnation, on the server clock (no request of the waiter's names it). It expires at
  -- an absolute time on that clock, so that the waiter knows the expiry exactly
  -- (floor(epoch / 1000) + claimMs), not only from when its message arrived.
  local e = clock_us()
  local told = redis.call('publish', fair_wake_channel(waiter), waiter .. '|' .. e) > 0
  if heard and not told then
    -- Nothing is changed: the message only names an epoch that was never made.
    return false
  end
  leave(head)
  redis.call('hset', name, head, 1, GRANT, waiter, EPOCH, e)
  local at = clock_ms() + claimMs
  redis.call('pexpireat', name, at)
  if told then
    fair_notify_first(at)
  else
    -- Nobody heard it here (its client may be gone): the next live waiter is told to come back,
    -- and is then first, back when the claim window ends, rather than at its own bound.
    local next = first_live()
    if next then
      local id = waiter_of(next)
      if id then
        redis.call('publish', fair_wake_channel(id), id)
      else
        redis.call('publish', channel .. ':' .. next, 0)
      end
    end
  end
  return true
end
