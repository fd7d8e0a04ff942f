-- Take every available permit: Redisson RedissonSemaphore#drainPermits, made replay-safe (a
-- resent drain answers the count the first copy took, and takes nothing more), with DECRBY
-- instead of SET 0 (which dropped the key's TTL), and leaving a negative count alone.
-- KEYS[1]  semaphore name (STRING, available permits)
-- KEYS[2]  replay records "edgelock_replay:{<name>}"
-- KEYS[3]  unused (kept so that every script keeps its key positions)
-- KEYS[4]  permits taken by edgelock callers and the waiter mark "edgelock_taken:{<name>}"
--          (STRING, see lib/taken.lua)
-- ARGV[1]  replay window in ms
-- ARGV[2]  request id
-- Returns  permits taken (0 when none were available)
-- Records  "D<taken>"
-- Billed   EVALSHA, GET record, GET, DECRBY, INCRBY count, SET record: 6
local name, replayKey, _, takenKey = unpack(KEYS)
local windowMs = tonumber(ARGV[1])
local id = ARGV[2]
-- @include lib/replay.lua
-- @include lib/taken.lua

return replay_once(id, 'D', function()
  local taken = math.max(tonumber(redis.call('get', name)) or 0, 0)
  if taken > 0 then
    redis.call('decrby', name, taken)
  end
  -- Drained permits are the caller's: it may give them back.
  taken_add(taken)
  return taken
end)
