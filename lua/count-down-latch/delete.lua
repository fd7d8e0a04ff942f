-- Delete a latch: Redisson RedissonCountDownLatch#deleteAsync (DEL, and when a latch was
-- deleted Redisson's "1" on its channel, so JVM waiters go on waiting as after Redisson's own
-- delete), made replay-safe by a record per request id so a resent copy cannot delete a latch
-- set after it. A deleted latch has count 0: every registered edgelock waiter is woken (its
-- await returns true, and its next check unregisters it, so the waiter keys go with the last
-- one). The replay records of the name stay until they expire.
-- KEYS[1]  latch name: STRING, the count (Redisson layout)
-- KEYS[2]  Redisson channel "redisson_countdownlatch__channel__{<name>}"
-- KEYS[3]  replay records "edgelock_replay:{<name>}" (prefix: one STRING per request id)
-- KEYS[4]  unused (kept so that every script keeps its key positions)
-- KEYS[5]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[6]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- ARGV[1]  replay window in ms
-- ARGV[2]  request id (32 hex characters)
-- Returns  1 a latch was deleted | 0 there was none
-- Records  "X1" | "X0"
local name, channel, replayKey, _, waiting, wake = unpack(KEYS)
local windowMs = tonumber(ARGV[1])
local id = ARGV[2]
-- @include lib/replay.lua
-- @include lib/wake.lua

return replay_once(id, 'X', function()
  local deleted = redis.call('del', name)
  if deleted == 1 then
    redis.call('publish', channel, 1)
  end
  wake_all()
  return deleted
end)
