-- Acquire (or re-enter) a reentrant lock: Redisson RedissonLock#tryLockInnerAsync, made
-- replay-safe by a record per request id so an HTTP retry never counts a hold twice. A waiting
-- call passes its waiter id: a busy attempt registers it, so the release that frees the lock
-- wakes it (lib/wake.lua). With a sixth key it claims an idempotency key: a completion marker
-- there means the work is done. Taking the lock is lib/reentrant.lua, shared with the fenced
-- lock's acquire.
-- KEYS[1]  lock name: HASH, field = owner, value = hold count (Redisson layout) + lib/hold.lua's
--          fields
-- KEYS[2]  replay records "edgelock_replay:{<name>}" (prefix: one STRING per request id)
-- KEYS[3]  unused (kept so that every lock script keeps its key positions)
-- KEYS[4]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[5]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[6]  optional completion marker "edgelock_done:{<name>}" (idempotency keys)
-- ARGV[1]  leaseTime in ms (the lock's TTL becomes at least this; it is never shortened)
-- ARGV[2]  owner field "<clientId>:<taskId>"
-- ARGV[3]  replay window in ms
-- ARGV[4]  request id (32 hex characters; becomes the lease id); the attempts of one waiting
--          call share its last 8, which tell a hold a copy of an earlier one made as the call's
-- ARGV[5]  waiter id of a call that blocks for a wake-up between attempts ('' = none)
-- ARGV[6]  with a waiter id: how long its registration lasts, in ms
-- ARGV[7]  '1': a release may hand the lock to this waiter (lib/wake.lua, hand_off_one), which
--          then holds it with the release's message; its next attempt confirms it (the TTL
--          becomes its lease). '0': only woken (fenced locks, idempotency keys)
-- ARGV[8]  '0' when the waiter cannot be registered yet (the first attempt of a wait), so an
--          acquiring attempt has no registration to end; anything else: it may be
-- Returns  {1, holdCount, epoch} acquired; epoch identifies this incarnation of the lock
--          | {0, pttl, jvm} held by another owner (pttl -1: no TTL); jvm 1 when the holder is
--          not an edgelock client (no epoch field: a Redisson client, whose release publishes
--          only on Redisson's channel)
--          | {0, pttl, 0, now, ahead} the same, the waiter registered: server time in ms when
--          it was, and how many registered waiters are ahead of it (1: one or more, when the
--          holder's pttl outlasts the waiter's longest block: lib/reentrant.lua, hold_register)
--          | {2, pttl, 0} the completion marker exists (its pttl, -1: no TTL)
--          | {-1, 0, 0} this request was cancelled, or the hold it made is already gone
-- Records  "A<epoch>" for a re-entry, or a lock created with a lease shorter than the replay
--          window; a lock it creates records itself (lib/reentrant.lua). Any record found first
--          (a cancel tombstone "C"/"U", a release's "R1"/"G") makes this a no-op.
-- Billed   free lock, nobody waiting: EVALSHA, EXISTS, HSET, PEXPIRE (4; a lease shorter than the
--          replay window: SET of its record, 5)
-- KEYS[1..5], ARGV[1..6] and ARGV[8] are bound by lib/reentrant-args.lua.

-- The common path first, before anything is defined: a free lock nobody waits for, with no
-- completion marker to look up. Redis runs a script's whole text on every call, so each local
-- and function defined before this line is made again by every acquire; on a busy host that
-- cost a free lock's cycle about 14 us (docs/benchmarks.md, "The scripts' common paths"). So
-- this is lib/reentrant-free.lua's hold_free and hold_new spelled out, with KEYS and ARGV as
-- they are and lib/hold-fields.lua's field names written out, for the one case they take:
-- the EXISTS that names the lock once, the registry twice and this request's record four times
-- finds none of them; the lock is created in an incarnation named after this request, with a
-- record when the lease is shorter than the replay window. No registration of this call's
-- waiter exists then (no registry).
local found
if not KEYS[6] then
  local record = KEYS[2] .. ':' .. ARGV[4]
  found = redis.call('exists', KEYS[1], KEYS[4], KEYS[4], record, record, record, record)
  if found == 0 then
    local e = string.format('%.0f', tonumber(string.sub(ARGV[4], 1, 13), 16) + 1)
    redis.call('hset', KEYS[1], ARGV[2], 1, 'edgelock:epoch', e, 'edgelock:by', ARGV[4])
    redis.call('pexpire', KEYS[1], ARGV[1])
    if tonumber(ARGV[1]) < tonumber(ARGV[3]) then
      redis.call('set', record, 'A' .. e, 'px', ARGV[3])
    end
    return {1, 1, tonumber(e) or 0}
  end
end

-- @include lib/reentrant-free.lua
local done = KEYS[6]
-- What the EXISTS above found (nil with a completion marker: not asked yet).
present = found

-- @include lib/reentrant.lua

local function completed()
  if done and redis.call('exists', done) == 1 then
    return {2, redis.call('pttl', done), 0}
  end
end

if not present and hold_free() then
  return completed() or {1, 1, tonumber(hold_create()) or 0}
end

local seen = hold_seen() and replay_get(id)
if seen then
  -- A replay of an applied acquire reports the hold it made instead of adding another, as long
  -- as that hold is still in this incarnation of the lock.
  local made = string.sub(seen, 1, 1) == 'A' and string.sub(seen, 2)
  local count = hold_replayed(made, hold_state())
  if count then
    return {1, count, tonumber(made) or 0}
  end
  return {-1, 0, 0}
end

if hold_absent() then
  -- Free, with waiters registered: its release must look for them, and the first of them learns
  -- when this hold expires (lib/wake.lua, notify_first), as after a hand-off.
  local c = completed()
  if c then
    return c
  end
  local e = hold_create(nil, nil, true)
  notify_first(clock_ms() + leaseMs)
  return {1, 1, tonumber(e) or 0}
end
local s = hold_state()
if s.by == id then
  -- A copy of the acquire that created this incarnation: the hold is its record.
  return {1, s.count or 0, tonumber(s.epoch) or 0}
end
if waiter ~= '' and s.count == 1 and s.by and string.sub(s.by, 25) == string.sub(id, 25) then
  -- The attempts of one waiting call end their ids with the same 8 hex digits: this
  -- incarnation was created by a copy of one of this call's earlier attempts, which arrived
  -- after that attempt was answered busy and took the lock once it was free. The hold is this
  -- call's, once: re-entering it would leave a hold nobody releases.
  hold_unregister()
  extend(leaseMs)
  replay_set(id, 'A' .. s.epoch)
  return {1, 1, tonumber(s.epoch) or 0}
end
local c = completed()
if c then
  return c
end

-- A release may have handed the lock to this waiter; a busy attempt asks for that with ARGV[7].
local e, count = hold_confirm(s)
if not e then
  local jvm, ahead
  e, count, jvm, ahead = hold_acquire(s)
  if not e then
    -- `count` is the holder's pttl here. A registered waiter also learns the server time of its
    -- registration (the clock was read for it: no call more), which dates a hand-off's expiry
    -- on its own clock (src/locks/protocol.ts, grantFromHandOff).
    if ahead == nil then
      return {0, count, jvm}
    end
    return {0, count, jvm, clock_ms(), ahead}
  end
end
return {1, count, tonumber(e) or 0}
