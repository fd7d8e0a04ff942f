-- Delete a latch: Redisson RedissonCountDownLatch#deleteAsync (DEL, and when a latch was
-- deleted Redisson's "1" on its channel, so JVM waiters go on waiting as after Redisson's own
-- delete), made replay-safe by a record per request id so a resent copy cannot delete a latch
-- set after it. A deleted latch has count 0: every registered edgelock waiter is woken (its
-- await returns true, and its next check unregisters it, so the waiter keys go with the last
-- one). The replay records of the name stay until they expire.
-- KEYS[1]  latch name: STRING, the count (Redisson layout)
-- KEYS[2]  Redisson channel "redisson_countdownlatch__channel__{<name>}"
-- KEYS[3]  replay records "edgelock_replay:{<name>}" (HASH request id -> state)
-- KEYS[4]  older replay records "edgelock_replay:{<name>}:old"
-- KEYS[5]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[6]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- ARGV[1]  replay window in ms
-- ARGV[2]  request id (32 hex characters)
-- Returns  1 a latch was deleted | 0 there was none
-- Records  "X1" | "X0"
local name = KEYS[1]
local channel = KEYS[2]
local replayKey = KEYS[3]
local replayOld = KEYS[4]
local waiting = KEYS[5]
local wake = KEYS[6]
local windowMs = tonumber(ARGV[1])
local id = ARGV[2]
-- @include lib/replay.lua
-- @include lib/wake.lua

local seen = replay_get(id)
if seen then
  return tonumber(string.sub(seen, 2))
end

local deleted = redis.call('del', name)
if deleted == 1 then
  redis.call('publish', channel, 1)
end
wake_all()
replay_set(id, 'X' .. deleted)
return deleted
