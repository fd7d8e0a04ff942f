-- Count a latch down by one: Redisson RedissonCountDownLatch#countDownAsync (DECR; at zero or
-- below the key is deleted, and at exactly zero Redisson's ZERO_COUNT message "0" goes out on
-- its channel for JVM waiters), made replay-safe by a record per request id so a resent copy
-- never counts twice; the count-down that opens the latch also wakes every registered edgelock
-- waiter (lib/wake.lua `wake_all`). On a missing latch it changes nothing (Redisson: DECR makes
-- -1, then DEL), apart from the record.
-- KEYS[1]  latch name: STRING, the count (Redisson layout)
-- KEYS[2]  Redisson channel "redisson_countdownlatch__channel__{<name>}"
-- KEYS[3]  replay records "edgelock_replay:{<name>}" (prefix: one STRING per request id)
-- KEYS[4]  unused (kept so that every script keeps its key positions)
-- KEYS[5]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[6]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- ARGV[1]  replay window in ms
-- ARGV[2]  request id (32 hex characters)
-- Returns  the count left: > 0 still closed | 0 open (it reached zero now, or did not exist)
-- Records  "D<count left>"
-- Billed   still closed: EVALSHA, GET (its record), DECR, SET (its record) (4); the count-down
--          that opens it adds DEL, PUBLISH and a ZRANGE of the registry
local name, channel, replayKey, _, waiting, wake = unpack(KEYS)
local windowMs = tonumber(ARGV[1])
local id = ARGV[2]
-- @include lib/replay.lua
-- @include lib/wake.lua

return replay_once(id, 'D', function()
  local left = redis.call('decr', name)
  if left <= 0 then
    redis.call('del', name)
    if left == 0 then
      redis.call('publish', channel, 0)
    end
    -- Open (also when the key had gone without a count-down): every live waiter gets a token.
    wake_all()
    left = 0
  end
  return left
end)
