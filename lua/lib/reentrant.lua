-- The reentrant lock's acquire on a lock HASH (Redisson RedissonLock#tryLockInnerAsync's
-- layout, with lib/hold.lua's epoch): what lua/lock/acquire.lua and lua/fenced-lock/acquire.lua
-- share (the fenced lock adds its token to each grant). Included by those scripts first, with
-- nothing defined before: the KEYS[1..5] and ARGV[1..6] they share are bound by
-- lib/reentrant-args.lua (name, owner, leaseMs, waiter, waitMs here; the replay keys and window
-- for lib/replay.lua). Includes that, lib/hold.lua and lib/wake.lua. Provides hold_replayed and
-- hold_acquire (below).
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

-- Takes the lock for `owner`, or re-enters it, for at least leaseMs; with `handoffs`, also
-- confirms a hand-off a release made to `waiter` (lib/wake.lua, hand_off_one). Returns the
-- incarnation (epoch, a decimal string) and the hold count. Held by another owner: returns nil,
-- the lock's pttl (-1: no TTL) and jvm, 1 when the holder is no edgelock client (no epoch: a
-- Redisson client, whose release publishes only on Redisson's channel, so nothing would wake a
-- registered waiter, which polls instead); otherwise `waiter` is registered, asking with `grant`
-- for a release to hand it the lock ("<leaseMs>|<owner>"; without it, it is only woken).
local function hold_acquire(handoffs, grant)
  local e
  local count
  if handoffs and waiter ~= '' and redis.call('hget', name, 'edgelock:grant') == waiter then
    -- A release handed the lock to this waiter: confirm it for the whole lease.
    redis.call('hdel', name, 'edgelock:grant')
    e = epoch()
    count = tonumber(redis.call('hget', name, owner))
  elseif redis.call('exists', name) == 0 then
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
  count = count or redis.call('hincrby', name, owner, 1)
  extend(leaseMs)
  return e, count
end
