-- Delete the lock whoever holds it, if it is in the given mode: Redisson
-- RedissonReadLock#forceUnlockAsync (mode 'read') and RedissonWriteLock#forceUnlockAsync (mode
-- 'write'), waking our waiters as a release would. Read holds' timeout keys expire on their own.
-- KEYS[1]  lock name (HASH, see lib/rw.lua)
-- KEYS[2]  Redisson's channel "redisson_rwlock:{<name>}"
-- KEYS[3]  registered waiters "edgelock_waiting:{<name>}" (ZSET)
-- KEYS[4]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[5]  timeout key prefix "{<name>}" (and the epoch key "edgelock_epoch:{<name>}")
-- KEYS[6]  replay records "edgelock_replay:{<name>}" (prefix, lib/replay.lua)
-- ARGV[1]  'read' | 'write'
-- ARGV[2]  replay window in ms
-- Returns  1 deleted | 0 not locked in that mode
-- Records  "G" for the acquire that created the lock (lib/rw.lua rw_gone), so that a late copy
--          of it does not take the lock again
-- Billed   EVALSHA, HGET, GET, DEL, SET NX (the creator's "G"), PUBLISH, and the waiter registry
--          only when the epoch key says someone registered (6)
local name, channel, waiting, wake, prefix, replayKey = unpack(KEYS)
local windowMs = tonumber(ARGV[2])
local id = ''
-- @include lib/rw.lua

if redis.call('hget', name, 'mode') ~= ARGV[1] then
  return 0
end
local _, by, waiters = rw_parse(redis.call('get', epochKey))
rw_delete(by)
redis.call('publish', channel, ARGV[1] == 'write' and 1 or 0)
if waiters then
  wake_all()
end
return 1
