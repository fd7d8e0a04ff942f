-- Renew one lease of a fair lock (lua/lock/renew.lua for a single lease), telling the waiter
-- then first when the renewal confirms a hand-off: the hand-off told it the claim window's end
-- (lib/fair.lua, fair_notify_first), and the confirmed lease outlasts that, so without this it
-- would come back then for nothing (a request per hand-off behind long holds). Sent by the
-- lease's own renewals; the keeper's batched renewals use lua/lock/renew.lua.
-- KEYS[1]  lock name (HASH)
-- KEYS[2]  "redisson_lock_queue:{<name>}"   LIST of waiting owners
-- KEYS[3]  "redisson_lock_timeout:{<name>}" ZSET owner -> server-time ms its slot lapses
-- KEYS[4]  "edgelock_waiters:{<name>}"      HASH of our queued owners
-- KEYS[5]  "redisson_lock__channel:{<name>}" Redisson waiters' channel prefix
-- ARGV[1]  leaseTime in ms (the TTL becomes at least this; never shortened)
-- ARGV[2]  owner field
-- ARGV[3]  claim window in ms (lib/fair.lua)
-- Returns  {1} held (TTL now at least its leaseTime) | {0} no longer held by that owner
-- Billed   EVALSHA, HMGET, PEXPIRE (GT); confirming a hand-off also HDEL, TIME and what
--          fair_notify_first costs (LRANGE, HGET, PUBLISH)
local name, queue, slots, waiters, channel = unpack(KEYS)
local leaseMs = tonumber(ARGV[1])
local claimMs = tonumber(ARGV[3])
-- @include lib/renew-one.lua
-- @include lib/fair.lua
local confirmed = renew_one(ARGV[2], leaseMs)
if confirmed == nil then
  return {0}
end
if confirmed then
  -- No earlier than the lock's expiry now: at least leaseMs from here (PEXPIRE GT).
  fair_notify_first(clock_ms() + leaseMs)
end
return {1}
