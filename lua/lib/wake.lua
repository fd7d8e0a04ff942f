-- Wake-ups for waiters, over pub/sub. Nothing is granted: a message only tells a waiting call
-- to attempt again now. Included by scripts, which define first:
--   waiting  "edgelock_waiting:{<name>}"  ZSET waiter id -> server-time ms its registration
--            lapses (KEYS); a waiter registers with each busy attempt and comes back well before
--   wake     "edgelock_wake:{<name>}"     the name of the clients' wake channels (KEYS, for the
--            hash slot): waiter "<client>:<wait>" listens on "edgelock_wake:{<name>}:<client>"
--            or, for a name a REST path cannot carry, a digest of it (lib/channel.lua)
-- A woken waiter leaves the ZSET (its next busy attempt registers it again), so each release
-- wakes waiters that are still waiting. A PUBLISH that no subscriber received (the waiter's
-- client died, or its stream was closed) wakes the next waiter instead.
-- Provides wake_channel, waiter_of, lock_entry, lock_entry_grant, waiting_grants, waiting_add,
-- waiting_mark_key, waiting_mark, waiting_remove, waiting_head, wake_up_to, wake_one,
-- waiting_leave, wake_all, wake_n, notify_first, and hand_off_one (which also needs lib/hold.lua, included
-- first by its script); includes lib/clock.lua and lib/channel.lua.
-- @include lib/clock.lua
-- @include lib/channel.lua

-- The claim window of a hand-off in ms: HAND_OFF_CLAIM_WINDOW_MS (src/limits.ts; test/lua.test.ts
-- checks that they agree), for the scripts that are not passed it.
local CLAIM_WINDOW_MS = 2000

-- The channel waiter `id` listens on ("edgelock_wake:{" is 15 characters).
local function wake_channel(id)
  return wake_channel_of(string.sub(wake, 16, -2), id)
end

-- The waiter id of a registration: a reentrant lock's waiter that asks for hand-offs registers as
-- "<waiter>|<leaseMs>|<owner>" (lib/reentrant-args.lua, member), every other one as its id.
local function waiter_of(entry)
  return string.match(entry, '^[^|]*')
end

-- The entry of a reentrant lock's waiter that asks for hand-offs: it carries the grant the
-- release that takes it reads (lock_entry_grant).
local function lock_entry(waiter, leaseMs, owner)
  return waiter .. '|' .. leaseMs .. '|' .. owner
end

-- The waiter, lease (ms, as a string) and owner a lock_entry carries; nothing for an entry that
-- asked for no hand-off.
local function lock_entry_grant(entry)
  return string.match(entry, '^([^|]*)|(%d+)|(.*)$')
end

-- The grants registered semaphore waiters asked for: HASH waiter id -> grant
-- (lib/permit-hand-off.lua), beside the ZSET (same hash slot).
local function waiting_grants()
  return waiting .. ':grant'
end

-- Makes `key` live at least `ms` more (it has just been written): PEXPIRE GT, one call when the
-- key's TTL is shorter, which is the common case (registrations of one length, made in order);
-- GT leaves a key without a TTL alone (it counts as infinite), so then PEXPIRE NX sets it.
-- Returns true when the key had no TTL (this write created it).
local function live_at_least(key, ms)
  return redis.call('pexpire', key, ms, 'gt') == 0 and redis.call('pexpire', key, ms, 'nx') == 1
end

-- Registers (or refreshes) waiter `id` for `ms`; with `grant`, a release may hand it permits
-- (lib/permit-hand-off.lua). The keys live as long as the last registration. Returns true when
-- this registration created the registry (nobody else is registered). (The reentrant lock
-- registers its waiters itself: lib/reentrant.lua hold_register.)
-- Billed   ZADD, TIME, PEXPIRE (+ PEXPIRE when the registry is new or outlives this one); with
--          a grant HSET, PEXPIRE (the same)
local function waiting_add(id, ms, grant)
  redis.call('zadd', waiting, clock_ms() + ms, id)
  local created = live_at_least(waiting, ms)
  if grant then
    local grants = waiting_grants()
    redis.call('hset', grants, id, grant)
    live_at_least(grants, ms)
  end
  return created
end

-- "edgelock_waiting:{<name>}:any": a STRING that exists while the ZSET may hold a registration
-- (same TTL), so that a free lock's acquire, which reads it with the lock in one EXISTS, knows
-- with no further call that nobody waits (the reentrant lock: lib/reentrant.lua).
local function waiting_mark_key()
  return waiting .. ':any'
end

-- Marks the registry as possibly holding a registration for `ms` more, the length of the one
-- waiting_add just made: like the ZSET's TTL, the mark's only grows (SET NX, else PEXPIRE GT),
-- so it lives as long as the last registration.
local function waiting_mark(ms)
  local mark = waiting_mark_key()
  if not redis.call('set', mark, 1, 'px', ms, 'nx') then
    redis.call('pexpire', mark, ms, 'gt')
  end
end

-- Unregisters waiter `id` (it acquired, gave up or was aborted). Returns true when it was
-- registered.
local function waiting_remove(id)
  redis.call('hdel', waiting_grants(), id)
  if redis.call('zrem', waiting, id) == 0 then
    return false
  end
  if redis.call('exists', waiting) == 0 then
    redis.call('del', waiting_mark_key())
  end
  return true
end

-- Unregisters `head`, the waiter a release is about to wake or hand the lock to, and answers
-- the grant it asked for (nil: none). `last`: no other registration is left (waiting_head read
-- it), so the registry is gone and so is its mark.
local function waiting_pop(head, last)
  local grant
  if not string.find(head, '|', 1, true) then
    local grants = waiting_grants()
    grant = redis.call('hget', grants, head)
    if grant then
      redis.call('hdel', grants, head)
    end
  end
  redis.call('zrem', waiting, head)
  if last then
    redis.call('del', waiting_mark_key())
  end
  return grant
end

-- The first live registration, whether it is the last one, and the second (nil: none); nil when
-- none is left (the
-- registry and its mark are then gone). The ZSET is ordered by lapse, so the first is live
-- exactly when none lapsed; otherwise the lapsed ones (their calls are gone) are dropped first.
-- Billed   ZRANGE (+ TIME when someone is registered; + ZREMRANGEBYSCORE, ZRANGE, maybe DEL
--          when some lapsed)
local function waiting_head()
  local r = redis.call('zrange', waiting, 0, 1, 'withscores')
  if r[1] and tonumber(r[2]) <= clock_ms() then
    redis.call('zremrangebyscore', waiting, '-inf', clock_ms())
    r = redis.call('zrange', waiting, 0, 1, 'withscores')
    if not r[1] then
      redis.call('del', waiting_mark_key())
    end
  end
  if not r[1] then
    return nil
  end
  return r[1], r[3] == nil, r[3]
end

-- Wakes up to `n` live waiters in registration order (earliest lapse first), each with a
-- message that only it reads, and unregisters each waiter it tried. With nobody registered it
-- costs one read (ZRANGE) and no clock.
local function wake_up_to(n)
  local woken = 0
  while woken < n do
    local head, last = waiting_head()
    if not head then
      return
    end
    waiting_pop(head, last)
    local id = waiter_of(head)
    if redis.call('publish', wake_channel(id), id) > 0 then
      woken = woken + 1
    end
  end
end

-- After the lock was freed: the next live waiter.
local function wake_one()
  wake_up_to(1)
end

-- The lock changed hands (a release handed it over, an attempt took it while waiters were
-- registered, or a renewal confirmed a hand-off) and now expires at `at` (server ms): tells the
-- first registration that asked for hand-offs that it is first, with "<id>|@<at>", so that its
-- wait is back by that expiry without a request of its own (src/locks/protocol.ts, noticeOf).
-- Without it the waiter that became first was bounded by what its last attempt saw (an older
-- holder's expiry and its rank then), and a holder that died after the change stalled the lock
-- until that bound: seconds, or its block cap. A first registration nobody hears keeps its place:
-- its client may be gone, or only between two streams (hosts end long responses every few
-- seconds), and such a wait attempts once it has subscribed again, which finds it first. So the
-- second is told to be back a claim window later, when a live first waiter would have taken the
-- lock. A first registration that asked for no hand-off is not told: it is a wait's first
-- attempt, and that wait attempts again once it has subscribed, which tells it the expiry.
-- Billed   ZRANGE, PUBLISH (+ PUBLISH when nobody heard the first; + TIME when the clock was not
--          read yet; + what waiting_head drops of lapsed registrations)
local function notify_first(at)
  local entry, _, second = waiting_head()
  if not entry then
    return
  end
  local head = lock_entry_grant(entry)
  if not head or redis.call('publish', wake_channel(head), head .. '|@' .. at) > 0 then
    return
  end
  second = second and lock_entry_grant(second)
  if second then
    redis.call('publish', wake_channel(second), second .. '|@' .. (at + CLAIM_WINDOW_MS))
  end
end

-- Unregisters waiter `id`, whose call ended without what it waited for. Returns true when it
-- was registered. When it was not, a release woke it after its last attempt (or it never was:
-- its attempt did not apply, or found a Redisson holder); that wake-up may have reached its
-- client after the call ended and been dropped there, so no live waiter heard of the release:
-- the next live waiter is woken in its place. At worst that costs the next waiter one attempt;
-- otherwise it would be back only at its own bound.
local function waiting_leave(id)
  if waiting_remove(id) then
    return true
  end
  wake_one()
  return false
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

-- The lock `name` was freed (needs lib/hold.lua): hands it to the first live waiter that asked
-- for a grant, held by its owner for min(its lease, claimMs) and marked with its id
-- ('edgelock:grant'), and sends it "<id>|<epoch>", so it holds the lock without another request
-- (the epoch is the server time of the hand-off in microseconds, and the lock expires at exactly
-- floor(epoch / 1000) + min(its lease, claimMs) ms on that clock);
-- a waiter that asked for none is only woken (the next one too when nobody received that). A
-- grant is never taken back, whatever PUBLISH counts: the count covers only this node's
-- subscribers (Redis Cluster delivers to the others too), so a waiter may hold the lock on a
-- message counted 0. A waiter that never takes it keeps the lock from others for at most
-- claimMs: one whose call ended gives it back (lua/lock/decline.lua); for one that nobody heard
-- here (its client may be gone), the next live waiter is also woken, so that it comes back by
-- the end of the claim window rather than at its own bound. Returns true when it handed the
-- lock on (it is held again), false when it only woke a waiter or found none. `waiters`: the freed
-- incarnation's WAITERS field, which the new one keeps (how long the registry is known to live,
-- lib/reentrant.lua hold_register); 1 when not given.
-- Billed   handing it on: ZPOPMIN, TIME, HSET, PEXPIREAT, PUBLISH (+ a ZPOPMIN per lapsed
--          registration; + what wake_one calls when nobody heard the message)
local function hand_off_one(claimMs, waiters)
  while true do
    -- The first registration, unregistered at once (ZPOPMIN): live unless it lapsed.
    local first = redis.call('zpopmin', waiting)
    local entry = first[1]
    if not entry then
      return false
    end
    if tonumber(first[2]) > clock_ms() then
      local head, ms, owner = lock_entry_grant(entry)
      if owner then
        -- A hand-off means others may wait too: the new incarnation (its epoch on the server
        -- clock, as new_epoch's) tells its release to look.
        local e = clock_us()
        redis.call('hset', name, owner, 1, GRANT, head, WAITERS, waiters or 1, EPOCH, e)
        -- At an absolute time on the clock the epoch was read from, so that the waiter knows the
        -- expiry exactly (floor(epoch / 1000) + ttl), not only from when its message arrived.
        local at = clock_ms() + math.max(1, math.min(tonumber(ms), claimMs))
        redis.call('pexpireat', name, at)
        if redis.call('publish', wake_channel(head), head .. '|' .. e) == 0 then
          wake_one()
        else
          notify_first(at)
        end
        return true
      elseif redis.call('publish', wake_channel(entry), entry) > 0 then
        return false
      end
    end
  end
end
