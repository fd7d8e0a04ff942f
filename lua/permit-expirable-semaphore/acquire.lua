-- Take permits with leases: Redisson RedissonPermitExpirableSemaphore#tryAcquireAsync (reclaim
-- expired permits, then take `permits` if available, each id scored with its expiry), with every
-- expired permit reclaimed instead of at most `permits`, server time instead of the client's
-- clock, and a replay record per request id so an HTTP retry never takes permits twice. A busy
-- attempt registers the caller's waiter id (lib/wake.lua) and reports when the next lease runs
-- out, which bounds its wait (an expiring permit wakes nobody by itself); while a Redisson client
-- holds a live permit, whose release publishes only on Redisson's channel, it says so instead
-- of registering (the waiter listens there).
-- KEYS[1]  semaphore name: STRING, available permits (Redisson layout; missing = 0)
-- KEYS[2]  permit leases "{<name>}:timeout" (ZSET id bytes -> expiry ms)
-- KEYS[3]  replay records "edgelock_replay:{<name>}" (prefix: one STRING per request id)
-- KEYS[4]  unused (kept so that every script keeps its key positions)
-- KEYS[5]  Redisson channel "redisson_sc:{<name>}"
-- KEYS[6]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[7]  waiters' wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[8]  permits edgelock callers took "edgelock_held:{<name>}" (ZSET, lib/permits.lua)
-- ARGV[1]  lease of each permit in ms
-- ARGV[2]  replay window in ms
-- ARGV[3]  request id (32 hex characters)
-- ARGV[4]  waiter id of a call that blocks for a wake-up between attempts ('' = none)
-- ARGV[5]  with a waiter id: how long its registration lasts, in ms
-- ARGV[6…] permit ids, 32 hex characters each (one per permit to take)
-- Returns  {1, available after} acquired (also for a replay whose permits are all still held)
--          | {0, ms until the next lease runs out (-1: none will), foreign} not enough
--            permits; foreign 1 when a Redisson client holds a live permit, else 0
--          | {-1, 0} this request was cancelled, or the permits it took are gone
-- Records  "A" acquired (a cancel tombstone "C" written first makes this a no-op)
local name, timeouts, replayKey, _, channel, waiting, wake, held = unpack(KEYS)
local leaseMs = tonumber(ARGV[1])
local windowMs = tonumber(ARGV[2])
local id = ARGV[3]
local waiter = ARGV[4]
local count = #ARGV - 5
-- @include lib/replay.lua
-- @include lib/wake.lua
-- @include lib/permits.lua

local now = clock_ms()
local seen = replay_get(id)
if seen then
  if seen == 'A' then
    for i = 6, #ARGV do
      local score = redis.call('zscore', timeouts, permit_bytes(ARGV[i]))
      if not score or tonumber(score) <= now then
        return {-1, 0}
      end
    end
    return {1, tonumber(redis.call('get', name)) or 0}
  end
  return {-1, 0}
end

local available = reclaim(now)
if available < count then
  local foreign = 0
  if held_foreign(now) then
    foreign = 1
  end
  if waiter ~= '' then
    if foreign == 1 then
      waiting_remove(waiter)
    else
      waiting_add(waiter, tonumber(ARGV[5]))
    end
  end
  -- The bound is a string: Lua would print the number as 9.2233720368548e+14.
  local next = redis.call('zrangebyscore', timeouts, '(' .. now, '(922337203685477', 'withscores', 'limit', 0, 1)
  if #next == 0 then
    return {0, -1, foreign}
  end
  return {0, tonumber(next[2]) - now, foreign}
end
if waiter ~= '' then
  waiting_remove(waiter)
end
local left = redis.call('decrby', name, count)
for i = 6, #ARGV do
  local member = permit_bytes(ARGV[i])
  redis.call('zadd', timeouts, now + leaseMs, member)
  held_set(member, now + leaseMs, now)
end
-- The leases follow the semaphore's own TTL, if it has one (Redisson does the same).
local ttl = redis.call('pttl', name)
if ttl > 0 then
  redis.call('pexpire', timeouts, ttl)
end
replay_set(id, 'A')
if left > 0 then
  wake_n(left)
end
return {1, left}
