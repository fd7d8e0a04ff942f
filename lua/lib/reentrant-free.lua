-- The free-lock path of the reentrant lock's acquire (lib/reentrant.lua builds the rest on it):
-- the one EXISTS every acquire starts with, and the creation of a new incarnation. Kept apart,
-- with nothing but lib/hold-fields.lua and lib/replay.lua under it, so that a script can take a
-- free lock before the rest of it is defined: Redis runs a script's whole text on every call,
-- creating each of its functions anew, and the registry's (lib/wake.lua) are most of the time a
-- free lock's acquire spent in Redis. lua/lock/acquire.lua goes further and writes hold_free and
-- hold_new out for that case before anything is defined (its comment says why): a change to
-- either here is a change there too.
-- Included before anything but such a written-out path; includes lib/reentrant-args.lua,
-- lib/hold-fields.lua and lib/replay.lua. Provides present, hold_free, hold_new (below).
-- @include lib/reentrant-args.lua
-- @include lib/hold-fields.lua
-- @include lib/replay.lua

-- Which of the lock, the waiter registry and this request's replay record exist, from one
-- EXISTS that names them 1, 2 and 4 times (EXISTS counts a key as often as it is named), so the
-- answer is a sum of distinct weights: lock 1, registry 2, record 4. A busy attempt thus learns
-- without a further call that it has no record (no GET) and that the lock is there.
local present

-- True when the lock is free, no replay record of this request exists and no waiter is
-- registered (no registry). Then hold_new (or lib/reentrant.lua's hold_create) takes it;
-- otherwise the caller reads the record when lib/reentrant.lua's hold_seen says there is one,
-- and its hold_absent tells a free lock with waiters registered.
local function hold_free()
  local record = replay_key(id)
  present = redis.call('exists', name, waiting, waiting, record, record, record, record)
  return present == 0
end

-- Creates the lock for `owner` (hold count 1, TTL leaseMs) in a new incarnation named after this
-- request, with `extra` fields (field, value, ...) in the same HSET; `waited`: waiters may be
-- registered (WAITERS tells the release to look). Returns the epoch. A lease shorter than the
-- replay window may expire while a copy of this request is still in flight, so then a record
-- says what it did; otherwise the hold outlives the window or a release records its end
-- ("A<epoch>" plus `suffix`). A registration of this call's waiter is not ended here
-- (lib/reentrant.lua, hold_create): none exists when hold_free said so.
local function hold_new(extra, suffix, waited)
  local e = id_epoch(id)
  local fields = extra or {}
  if waited then
    fields[#fields + 1] = WAITERS
    fields[#fields + 1] = 1
  end
  redis.call('hset', name, owner, 1, EPOCH, e, BY, id, unpack(fields))
  redis.call('pexpire', name, leaseMs)
  if leaseMs < windowMs then
    replay_set(id, 'A' .. e .. (suffix or ''))
  end
  return e
end
