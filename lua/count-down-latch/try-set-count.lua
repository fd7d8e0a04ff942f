-- Set a latch's count if the latch does not exist: Redisson
-- RedissonCountDownLatch#trySetCountAsync (SET, then Redisson's NEW_COUNT message "1" on its
-- channel so JVM waiters see the latch closed), made replay-safe by a record per request id: a
-- resent copy (an HTTP retry after a lost answer) reports what the first copy did, instead of
-- answering 0 to the key its own first copy set, or setting a latch created after it.
-- KEYS[1]  latch name: STRING, the count (Redisson layout)
-- KEYS[2]  Redisson channel "redisson_countdownlatch__channel__{<name>}"
-- KEYS[3]  replay records "edgelock_replay:{<name>}" (prefix: one STRING per request id)
-- KEYS[4]  unused (kept so that every script keeps its key positions)
-- ARGV[1]  count, a positive integer (the client refuses 0: a latch at 0 has no key)
-- ARGV[2]  replay window in ms
-- ARGV[3]  request id (32 hex characters)
-- Returns  1 the count was set | 0 the latch exists (its count is left alone)
-- Records  "T1" | "T0"
local name, channel, replayKey, _ = unpack(KEYS)
local count = ARGV[1]
local windowMs = tonumber(ARGV[2])
local id = ARGV[3]
-- @include lib/replay.lua

return replay_once(id, 'T', function()
  if redis.call('exists', name) == 1 then
    return 0
  end
  redis.call('set', name, count)
  redis.call('publish', channel, 1)
  return 1
end)
