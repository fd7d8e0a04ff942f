-- The reentrant lock's acquire on a lock HASH (Redisson RedissonLock#tryLockInnerAsync's
-- layout, with lib/hold.lua's fields): what lua/lock/acquire.lua and lua/fenced-lock/acquire.lua
-- share (the fenced lock adds its token to each grant). Included by those scripts first, with
-- nothing defined before: the KEYS and ARGV they share are bound by lib/reentrant-args.lua.
-- Includes lib/reentrant-free.lua (which binds those and provides hold_free, hold_new),
-- lib/hold.lua, lib/replay.lua and lib/wake.lua. Provides hold_seen, hold_absent, hold_create,
-- hold_state, hold_replayed, hold_confirm and hold_acquire (below).
-- The common path, a free lock, costs EXISTS, HSET, PEXPIRE: the hold is its own replay record
-- (BY names the request that created it), so no record is written while the hold lives; one
-- is written only where the hold may be gone within the replay window (a lease shorter than it,
-- a re-entry), and a release that deletes the lock writes one (lib/release.lua). The same
-- EXISTS also reads the waiter registry (lib/wake.lua: the ZSET exists exactly while it may
-- hold a registration, as long as the last one, so it needs no mark of its own): a lock created
-- while nobody is registered has no WAITERS field, so its release does not read the registry
-- either.
-- @include lib/reentrant-free.lua
-- @include lib/hold.lua
-- @include lib/replay.lua
-- @include lib/wake.lua

-- The waiter's entry in the registry: a lock_entry, which carries its grant, when it asks for
-- hand-offs (ARGV[7] '1', the reentrant lock's); otherwise the waiter id, as every other kind's.
local member = waiter
if waiter ~= '' and ARGV[7] == '1' then
  member = lock_entry(waiter, ARGV[1], owner)
end

-- True when this request's replay record exists (after hold_free).
local function hold_seen()
  return present >= 4
end

-- True when the lock does not exist (after hold_free said something does).
local function hold_absent()
  return present % 2 == 0
end

-- Unregisters this call's waiter, in both the entries it may have: the first attempt of a wait
-- registers the bare waiter id (it is not subscribed yet, so it asks for no hand-off), later ones
-- `member`. One ZREM.
local function hold_unregister()
  redis.call('zrem', waiting, waiter, member)
end

-- Creates the lock (lib/reentrant-free.lua, hold_new: same arguments, returns the epoch) and
-- ends the registration this call's waiter may have.
local function hold_create(extra, suffix, waited)
  local e = hold_new(extra, suffix, waited)
  if waiter ~= '' and registered then
    hold_unregister()
  end
  return e
end

-- The lock HASH's fields this request needs, in one HMGET: hold count of `owner`, epoch, the
-- creating request, a pending hand-off, the creating acquire's fencing token and WAITERS.
local function hold_state()
  local s = redis.call('hmget', name, owner, EPOCH, BY, GRANT, TOKEN, WAITERS)
  return {
    count = tonumber(s[1]),
    epoch = s[2] or '',
    by = s[3],
    grant = s[4],
    token = s[5],
    waiters = s[6],
  }
end

-- The hold count of an applied acquire being replayed, whose record names incarnation `made`
-- (false or nil: the record is no acquire's), as long as its hold is still in this incarnation
-- of the lock; nil when it is gone (expired, released, or the lock is a newer incarnation).
local function hold_replayed(made, s)
  if made and made == s.epoch and s.count then
    return s.count
  end
  return nil
end

-- Confirms a hand-off a release made to `waiter` (lib/wake.lua, hand_off_one): the waiter holds
-- the lock from then on for at least leaseMs. Returns the epoch and the hold count; nothing when
-- no hand-off went to it. Only the reentrant lock's waiters ask for hand-offs. The confirm is
-- recorded ("A<epoch>"): a copy of this request (its answer lost, the wait sent another) must
-- find the hold it confirmed, not re-enter it while it lives, nor take the lock anew once it is
-- gone; and a cancel of this request finds what to undo.
local function hold_confirm(s)
  if waiter ~= '' and s.grant == waiter then
    redis.call('hdel', name, GRANT)
    hold_unregister()
    extend(leaseMs)
    replay_set(id, 'A' .. s.epoch)
    return s.epoch, s.count
  end
end

-- Registers `waiter` (lib/wake.lua) as `member`: asking for a hand-off when that carries a grant.
-- A waiter that is registered already keeps its place while at least half its registration is
-- left (it comes back within that half: wait/loop.ts), so that coming back never puts it behind
-- waiters that registered after it: the registry stays in registration order, and releases hand
-- the lock over in it. A registered waiter that now asks for hand-offs drops the bare entry of its
-- first attempt. Returns how many registrations are ahead of it: 0 none (a registry it created),
-- else its rank, read where it counts: the holder's expiry is the first waiter's to catch (it
-- takes the expired lock, and its release hands it on), the second comes back a claim window
-- later (in case the first one's client is gone: wait/backoff.ts expiryBound), the others need
-- not. That bound matters only while the holder's `pttl` is under the longest block of a waiter
-- asking for hand-offs (a third of its registration: `blockCap` in locks/protocol.ts):
-- otherwise a new registration in a registry that existed answers 1 ("one or more") without the
-- ZRANK.
-- The registry's TTL: the lock's WAITERS field (`s.waiters`) says until when the registry is
-- known to live (server ms; lib/hold.lua), so a registration that ends before then sets no TTL.
-- Otherwise it sets the TTL a quarter of a registration length past its own (so the next
-- registrations within that quarter need no call; the registry outlives its last registration by
-- at most that) and records that in WAITERS. A registry that did not exist
-- (hold_free's EXISTS says) gets its TTL however long WAITERS says: it is new.
-- Billed   keeping its place: ZSCORE, ZRANK (+ TIME); otherwise ZADD, TIME, and PEXPIREAT for a
--          new registry, ZRANK in one that existed when that bound matters, PEXPIREAT and HSET
--          past what WAITERS says (+ ZSCORE, and ZREM when it now asks for hand-offs, when it
--          may be registered)
local function hold_register(s, pttl)
  local ms = tonumber(waitMs)
  -- Whether the registry exists, from hold_free's EXISTS: unknown once a ZREM here may have
  -- emptied it.
  local existed = present % 4 >= 2
  if registered then
    local lapses = tonumber(redis.call('zscore', waiting, member))
    -- The wait's first attempt registered its bare id, before it subscribed: the entry that now
    -- asks for hand-offs takes that entry's place, so subscribing never puts a waiter behind the
    -- waiters that registered meanwhile.
    local bare
    if not lapses and member ~= waiter then
      lapses = tonumber(redis.call('zscore', waiting, waiter))
      bare = lapses ~= nil
    end
    local left = lapses and lapses - clock_ms()
    if left and left >= ms / 2 then
      if bare then
        -- Added before the bare entry goes, so the registry never empties (and loses its TTL).
        redis.call('zadd', waiting, lapses, member)
        redis.call('zrem', waiting, waiter)
      end
      if not s.waiters then
        redis.call('hset', name, WAITERS, 1)
      end
      return redis.call('zrank', waiting, member)
    end
    if bare ~= false and member ~= waiter and redis.call('zrem', waiting, waiter) == 1 then
      existed = nil
    end
  end
  local lapse = clock_ms() + ms
  redis.call('zadd', waiting, lapse, member)
  local known = tonumber(s.waiters) or 0
  local created = existed == false
  if known >= lapse then
    if created then
      redis.call('pexpireat', waiting, known)
    elseif existed == nil then
      -- It has a TTL of at least `known` unless the ZREM above emptied it: then it is new.
      created = redis.call('pexpireat', waiting, known, 'nx') == 1
    end
  else
    local horizon = lapse + math.floor(ms / 4)
    if created then
      redis.call('pexpireat', waiting, horizon)
    elseif redis.call('pexpireat', waiting, horizon, 'gt') == 0 and existed == nil then
      created = redis.call('pexpireat', waiting, horizon, 'nx') == 1
    end
    redis.call('hset', name, WAITERS, horizon)
  end
  if created then
    return 0
  elseif member ~= waiter and pttl >= 0 and pttl < ms / 3 then
    return redis.call('zrank', waiting, member)
  end
  return 1
end

-- Re-enters the lock of `owner` or, held by another, registers `waiter`. Returns the epoch and
-- the hold count. Held by another owner: returns nil, the lock's pttl (-1: no TTL), jvm (1
-- when the holder is no edgelock client: no epoch, a Redisson client, whose release publishes
-- only on Redisson's channel, so nothing would wake a registered waiter, which polls instead)
-- and, when `waiter` was registered (hold_register: a release hands it the lock when its entry
-- carries a grant, else only wakes it), how many waiters are ahead of it (hold_register). The
-- re-entry is recorded ("A<epoch>" plus `suffix`): a replay finds it.
local function hold_acquire(s, suffix)
  if not s.count then
    local ahead
    local pttl = redis.call('pttl', name)
    if waiter ~= '' and s.epoch ~= '' then
      ahead = hold_register(s, pttl)
    end
    return nil, pttl, s.epoch == '' and 1 or 0, ahead
  end
  if waiter ~= '' and registered then
    hold_unregister()
  end
  local count = redis.call('hincrby', name, owner, 1)
  extend(leaseMs)
  replay_set(id, 'A' .. s.epoch .. (suffix or ''))
  return s.epoch, count
end
