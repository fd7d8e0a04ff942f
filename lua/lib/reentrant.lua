-- The reentrant lock's acquire on a lock HASH (Redisson RedissonLock#tryLockInnerAsync's
-- layout, with lib/hold.lua's epoch): what lua/lock/acquire.lua and lua/fenced-lock/acquire.lua
-- share (the fenced lock adds its token to each grant). Included by those scripts first, with
-- nothing defined before: the KEYS[1..5] and ARGV[1..6] they share are bound by
-- lib/reentrant-args.lua (name, owner, leaseMs, waiter, waitMs here; the replay keys and window
-- for lib/replay.lua). Includes that, lib/hold.lua and lib/wake.lua. Provides hold_replayed,
-- hold_confirm and hold_acquire (below).
-- @include lib/reentrant-args.lua
-- @include lib/hold.lua
-- @include lib/wake.lua

-- The hold count of an applied acquire being replayed, whose record names incarnation `made`
-- (false or nil: the record is no acquire's), as long as its hold is still in this incarnation
-- of the lock; nil when it is gone (expired, released, or the lock is a newer incarnation).
local function hold_replayed(made)
  if made and made == epoch() and redis.call('hexists', name, owner) == 1 then
    return tonumber(redis.call('hget', name, owner))
  end
  return nil
end

-- Confirms a hand-off a release made to `waiter` (lib/wake.lua, hand_off_one): the waiter holds
-- the lock from then on for at least leaseMs. Returns the epoch and the hold count; nothing when
-- no hand-off went to it. Only the reentrant lock's waiters ask for hand-offs.
local function hold_confirm()
  if waiter ~= '' and redis.call('hget', name, 'edgelock:grant') == waiter then
    redis.call('hdel', name, 'edgelock:grant')
    local e, count = epoch(), tonumber(redis.call('hget', name, owner))
    waiting_remove(waiter)
    extend(leaseMs)
    return e, count
  end
end

-- Takes the lock for `owner`, or re-enters it, for at least leaseMs. Returns the incarnation
-- (epoch, a decimal string) and the hold count. Held by another owner: returns nil, the lock's
-- pttl (-1: no TTL) and jvm, 1 when the holder is no edgelock client (no epoch: a Redisson
-- client, whose release publishes only on Redisson's channel, so nothing would wake a
-- registered waiter, which polls instead); otherwise `waiter` is registered, asking with `grant`
-- for a release to hand it the lock ("<leaseMs>|<owner>"; without it, it is only woken).
local function hold_acquire(grant)
  local e
  if redis.call('exists', name) == 0 then
    e = new_epoch()
  elseif redis.call('hexists', name, owner) == 1 then
    e = epoch()
  else
    if waiter ~= '' and epoch() ~= '' then
      waiting_add(waiter, tonumber(waitMs), grant and (leaseMs .. '|' .. owner) or nil)
    end
    return nil, redis.call('pttl', name), epoch() == '' and 1 or 0
  end
  if waiter ~= '' then
    waiting_remove(waiter)
  end
  local count = redis.call('hincrby', name, owner, 1)
  extend(leaseMs)
  return e, count
end
