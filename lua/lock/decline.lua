-- A waiting call of a reentrant lock that asked releases for hand-offs ends without the lock (it
-- gave up, was aborted, or failed): leave like leave.lua, and give back a hand-off a release
-- made to it that it never took (lib/wake.lua, hand_off_one: the lock still marked with its
-- waiter id). The hold that hand-off made goes as a release would take it, and a lock it frees
-- goes to the next waiter. Otherwise a hand-off that reached the call after it ended would keep
-- the lock from everyone for the claim window. A hand-off the call took is confirmed by its next
-- acquire, or held on the release's message by a call that then never sends this.
-- KEYS[1]  lock name (HASH)
-- KEYS[2]  Redisson unlock channel "redisson_lock__channel:{<name>}" (wakes JVM waiters)
-- KEYS[3]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[4]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- ARGV[1]  waiter id of the call
-- ARGV[2]  owner field of the call
-- ARGV[3]  claim window in ms of a hand-off to the next waiter
-- ARGV[4]  leaseTime in ms of the call (its registration reads "<waiter>|<leaseMs>|<owner>",
--          lib/reentrant-args.lua)
-- Returns  1 unregistered (the next waiter told when it was first) | 0 it was not registered
--          (the next live waiter woken, as leave.lua) | 2 a hand-off to it given back
local name, channel, waiting, wake = unpack(KEYS)
local waiter = ARGV[1]
local owner = ARGV[2]
-- @include lib/release.lua
-- @include lib/wake.lua

-- Unregisters the call in both entries it may have (lib/reentrant.lua, hold_unregister): true
-- when it was registered. A waiter behind another does not come back when the holder's lease
-- runs out (the first one takes the expired lock and hands it on: lib/reentrant.lua,
-- hold_register), so when the first one leaves, the next one is told (its id, no grant): its
-- next attempt finds itself first, and from then on it is back by the holder's expiry instead of
-- at its own bound.
local function unregister()
  local member = lock_entry(waiter, ARGV[4], owner)
  -- Its own two entries may both be there (the first attempt's bare one, not yet dropped).
  local first = redis.call('zrange', waiting, 0, 2)
  if redis.call('zrem', waiting, waiter, member) == 0 then
    return false
  end
  local ours = { [waiter] = true, [member] = true }
  if first[1] and ours[first[1]] then
    for i = 2, #first do
      if not ours[first[i]] then
        local id = waiter_of(first[i])
        redis.call('publish', wake_channel(id), id)
        break
      end
    end
  end
  return true
end

if redis.call('hget', name, 'edgelock:grant') ~= waiter or redis.call('hexists', name, owner) == 0 then
  if unregister() then
    return 1
  end
  -- As lib/wake.lua's waiting_leave: a wake-up may have reached it after it ended.
  wake_one()
  return 0
end
unregister()
redis.call('hdel', name, 'edgelock:grant')
if drop_hold() then
  hand_off_one(tonumber(ARGV[3]))
end
return 2
