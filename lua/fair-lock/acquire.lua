-- Acquire, re-enter, confirm a hand-off, or queue for a fair lock: Redisson
-- RedissonFairLock#tryLockInnerAsync with server time (TIME) instead of client clocks, and
-- replay-safe like the reentrant lock. Protocol of a waiter: this script (which enqueues it),
-- then a wait for the release's message on its wake channel (lib/fair.lua) for at most
-- min(time left, the holder's PTTL, half its slot): the message carries the epoch of the
-- hand-off, which makes the lock the waiter's without another request; otherwise this script
-- again: it confirms a hand-off (or a lapsed one it finds), or refreshes the waiter's slot.
-- Where it cannot subscribe the waiter sleeps instead; the scripts are the same. A hand-off
-- that no subscriber heard (its waiter died) also wakes the waiter second in line
-- (lib/fair.lua), which is then first and back when the claim window ends; every waiter comes
-- back at least every third of its slot (FAIR_SLOT_MS / 3) to renew it.
-- KEYS[1]  lock name: HASH, field = owner, value = hold count (+ lib/hold.lua's fields)
-- KEYS[2]  "redisson_lock_queue:{<name>}"   LIST of waiting owners
-- KEYS[3]  "redisson_lock_timeout:{<name>}" ZSET owner -> server-time ms its slot lapses
-- KEYS[4]  "edgelock_waiters:{<name>}"      HASH of our queued owners
-- KEYS[5]  "redisson_lock__channel:{<name>}" Redisson waiters' channel prefix
-- KEYS[6]  replay records "edgelock_replay:{<name>}"
-- KEYS[7]  unused (kept so that every script keeps its key positions)
-- ARGV[1]  leaseTime in ms (the TTL becomes at least this; never shortened, except by the
--          confirmation of a hand-off, which sets it to exactly this: the claim window before
--          was no lease's)
-- ARGV[2]  owner field
-- ARGV[3]  replay window in ms
-- ARGV[4]  request id (32 hex characters; becomes the lease id)
-- ARGV[5]  slot in ms: how long the waiter stays queued without coming back (0 = do not queue)
-- ARGV[6]  claim window in ms of a hand-off this call makes to another waiter
-- ARGV[7]  waiter id of this acquire call (hex): marks its place in the queue and its hand-off
-- Returns  {1, holdCount, epoch, 0} acquired | {0, pttl, position, jvm} busy: pttl of the lock
--          (-2 when it is free but another waiter is first), position of the owner in the queue
--          (0 = first, -1 = not queued), jvm = 1 when a Redisson client holds the lock (no epoch)
--          or waits ahead of the owner (not in our registry): its release tells the next waiter
--          only on Redisson's channel "<KEYS[5]>:<owner>", which the waiter then also listens on
--          | {0, pttl, position, jvm, now} the same when this request queued the owner: now is
--          the server time in ms it did (it dates a hand-off's expiry on the waiter's clock)
--          | {-1, 0, 0, 0} this request was cancelled, or the hold it made is already gone
-- Records  "A<epoch>" re-entered, confirmed a hand-off, or created the lock with a lease shorter
--          than the replay window | "Q" queued | "B" busy without queueing. A lock it creates
--          records itself (BY, see create below). A replay of a busy answer only reports the
--          owner's place: a late copy of an attempt never takes the lock, re-enters a hold made
--          since, or queues an owner that has left. Any other record found first (a cancel's
--          "C"/"U", a release's "R1"/"G") makes this a no-op.
-- Billed   free lock, nobody queued: EVALSHA, EXISTS, HSET, PEXPIRE (4)
local name, queue, slots, waiters, channel, replayKey, _ = unpack(KEYS)
local leaseMs = tonumber(ARGV[1])
local owner = ARGV[2]
local windowMs = tonumber(ARGV[3])
local id = ARGV[4]
local slotMs = tonumber(ARGV[5])
local claimMs = tonumber(ARGV[6])
local waiter = ARGV[7]
-- @include lib/replay.lua
-- @include lib/hold.lua
-- @include lib/fair.lua

-- The busy reply (see Returns); `now`: the server time the owner was queued at.
local function busy(now)
  local position = redis.call('lpos', queue, owner) or -1
  local jvm = 0
  if redis.call('exists', name) == 1 and epoch() == '' then
    jvm = 1
  elseif position > 0 then
    for _, ahead in ipairs(redis.call('lrange', queue, 0, position - 1)) do
      if redis.call('hexists', waiters, ahead) == 0 then
        jvm = 1
        break
      end
    end
  end
  local pttl = redis.call('pttl', name)
  if now then
    return {0, pttl, position, jvm, now}
  end
  return {0, pttl, position, jvm}
end

-- Takes the free lock for `owner` in a new incarnation named after this request (lib/hold.lua
-- id_epoch: no TIME), whose BY field is this request's replay record: a copy of it finds the HASH
-- and answers the hold. Only a lease shorter than the replay window, which may expire while a
-- copy is still in flight, also writes a record ("A<epoch>"); otherwise a release of the hold
-- records its end (lib/release.lua).
local function create()
  local e = id_epoch(id)
  redis.call('hset', name, owner, 1, EPOCH, e, BY, id)
  redis.call('pexpire', name, leaseMs)
  if leaseMs < windowMs then
    replay_set(id, 'A' .. e)
  end
  return {1, 1, tonumber(e) or 0, 0}
end

-- The common path: no lock, nobody queued (no queue LIST, slot ZSET or registry HASH: Redisson's
-- scripts and ours delete them once empty) and no record of this request, all in one EXISTS.
if redis.call('exists', name, queue, slots, waiters, replayKey .. ':' .. id) == 0 then
  return create()
end

local seen = replay_get(id)
local s = redis.call('hmget', name, owner, EPOCH, BY, GRANT)
local count, current, by, grant = tonumber(s[1]), s[2] or '', s[3], s[4]
if seen then
  local kind = string.sub(seen, 1, 1)
  if kind == 'A' and string.sub(seen, 2) == current and count then
    return {1, count, tonumber(current) or 0, 0}
  end
  if kind == 'Q' or kind == 'B' then
    return busy()
  end
  return {-1, 0, 0, 0}
end
if by == id then
  -- A copy of the acquire that created this incarnation: the hold is its record.
  return {1, count or 0, tonumber(current) or 0, 0}
end

local e
local confirmed = false
if grant == waiter then
  -- A release handed the lock to this waiter: take it for the whole lease.
  redis.call('hdel', name, GRANT)
  e = current
  confirmed = true
elseif count then
  count = redis.call('hincrby', name, owner, 1)
  e = current
elseif redis.call('exists', name) == 0 then
  local head = first_live()
  -- Free, but an earlier waiter is alive: it goes first (its holder expired unreleased). A
  -- queued owner behind it is back no earlier than a claim window after the expiry (src/wait/
  -- backoff.ts, expiryBound), by when a live first waiter would have taken the lock: if nobody
  -- hears that waiter's hand-off now (its client is gone), this owner takes the lock instead of
  -- handing it to nobody for another claim window.
  if head and head ~= owner
    and hand_off(head, redis.call('lpos', queue, owner) ~= false) ~= false then
    -- Handed over: this owner stays queued (below).
  else
    -- Also clears what a Redisson script left of this owner's wait: it drops waiters from the
    -- queue and the ZSET, never from our registry.
    leave(owner)
    local r = create()
    if head then
      -- It was first: the waiter now first learns when this hold expires.
      fair_notify_first(clock_ms() + leaseMs)
    end
    return r
  end
end

if e then
  if confirmed and count == 1 then
    -- The claim window was nobody's lease: the lease starts now and lasts exactly leaseMs, so
    -- a lease shorter than the window does not hold the lock for the rest of it.
    redis.call('pexpire', name, leaseMs)
    -- That may end it sooner than the claim window the first waiter was told of.
    if leaseMs < claimMs then
      fair_notify_first(clock_ms() + leaseMs)
    end
  else
    extend(leaseMs)
  end
  replay_set(id, 'A' .. e)
  return {1, count, tonumber(e) or 0, 0}
end

if slotMs > 0 then
  local now = clock_ms()
  queue_up(owner, waiter, now, now + slotMs)
  replay_set(id, 'Q')
  return busy(now)
end
replay_set(id, 'B')
return busy()
