-- Give permits back: Redisson RedissonSemaphore#release (INCRBY, publish the new value), made
-- replay-safe (a resent release adds once) and bounded: unless the caller opts in, a release
-- is refused (and changes nothing) when it is more than edgelock callers have taken and would
-- also make more permits available than were set. Giving back what one took therefore always
-- works, whatever a Redisson client did meanwhile (addPermits, reducePermits, delete +
-- trySetPermits), as it does in Redisson.
-- KEYS[1]  semaphore name (STRING, available permits)
-- KEYS[2]  permits set "edgelock_permits:{<name>}" (STRING: trySetPermits + addPermits)
-- KEYS[3]  replay records "edgelock_replay:{<name>}"
-- KEYS[4]  unused (kept so that every script keeps its key positions)
-- KEYS[5]  Redisson channel "redisson_sc:{<name>}"
-- KEYS[6]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[7]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[8]  permits taken by edgelock callers "edgelock_taken:{<name>}" (see lib/taken.lua)
-- ARGV[1]  permits to give back (integer >= 1)
-- ARGV[2]  '1' allows a release beyond the permits set (Redisson's unbounded release), else '0'
-- ARGV[3]  replay window in ms
-- ARGV[4]  request id
-- Returns  {1, available after} released (also for a replay of an applied release)
--          | {0, available, set} refused: more than edgelock callers took, and available +
--            permits would exceed the permits set (set -1: none recorded and the semaphore
--            does not exist)
-- Records  "R" released (a refusal changes nothing and is not recorded)
local name, limitKey, replayKey, _, channel, waiting, wake, takenKey = unpack(KEYS)
local permits = tonumber(ARGV[1])
local allowOver = ARGV[2] == '1'
local windowMs = tonumber(ARGV[3])
local id = ARGV[4]
-- @include lib/replay.lua
-- @include lib/wake.lua
-- @include lib/taken.lua

if replay_get(id) then
  return {1, tonumber(redis.call('get', name)) or 0}
end
local available = tonumber(redis.call('get', name))
local limit = tonumber(redis.call('get', limitKey))
if not allowOver and permits > taken_get() then
  -- A semaphore a Redisson client set has no recorded limit: its releases stay unbounded, as
  -- Redisson's are. One that was never set has nothing to give back to.
  if limit == nil and available == nil then
    return {0, 0, -1}
  end
  if limit ~= nil and (available or 0) + permits > limit then
    return {0, available or 0, limit}
  end
end
local after = redis.call('incrby', name, permits)
taken_sub(permits)
redis.call('publish', channel, after)
wake_n(after)
replay_set(id, 'R')
return {1, after}
