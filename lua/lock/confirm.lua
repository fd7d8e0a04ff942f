-- Renew one lease of a reentrant lock (lua/lock/renew.lua for a single lease), telling the
-- waiter then first when the renewal confirms a hand-off: the hand-off told it the claim
-- window's end (lib/wake.lua, notify_first), and the confirmed lease outlasts that, so without
-- this it would come back then for nothing (a request per hand-off behind long holds). Sent by
-- the lease's own renewals; the keeper's batched renewals use renew.lua.
-- KEYS[1]  lock name (HASH)
-- KEYS[2]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[3]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- ARGV[1]  leaseTime in ms (the TTL becomes at least this; never shortened)
-- ARGV[2]  owner field
-- Returns  {1} held (TTL now at least its leaseTime) | {0} no longer held by that owner
-- Billed   EVALSHA, HMGET, PEXPIRE (GT); confirming a hand-off also HDEL, TIME and what
--          notify_first costs (ZRANGE, PUBLISH)
local name, waiting, wake = unpack(KEYS)
local leaseMs = tonumber(ARGV[1])
-- @include lib/renew-one.lua
-- @include lib/wake.lua
local confirmed = renew_one(ARGV[2], leaseMs)
if confirmed == nil then
  return {0}
end
if confirmed then
  -- No earlier than the lock's expiry now: at least leaseMs from here (PEXPIRE GT).
  notify_first(clock_ms() + leaseMs)
end
return {1}
