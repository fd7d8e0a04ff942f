-- Give permits back: Redisson RedissonSemaphore#release (INCRBY, publish the new value), made
-- replay-safe (a resent release adds once) and bounded: unless the caller opts in, a release
-- is refused (and changes nothing) when it is more than edgelock callers have taken and would
-- also make more permits available than were set. Giving back what one took therefore always
-- works, whatever a Redisson client did meanwhile (addPermits, reducePermits, delete +
-- trySetPermits), as it does in Redisson.
-- The permits freed go first to registered waiters that asked for a hand-off (first
-- registered first): each holds them on the release's message, as the busy attempt it
-- registered with (lib/permit-hand-off.lua); a waiter that asked for none is woken.
-- A permit handle's release sends its acquire's request id: its record ("A<permits>" while the
-- acquire's window lasts) becomes "R", so a late copy of the acquire finds it and takes nothing.
-- KEYS[1]  semaphore name (STRING, available permits)
-- KEYS[2]  permits set "edgelock_permits:{<name>}" (STRING: trySetPermits + addPermits)
-- KEYS[3]  replay records "edgelock_replay:{<name>}"
-- KEYS[4]  unused (kept so that every script keeps its key positions)
-- KEYS[5]  Redisson channel "redisson_sc:{<name>}"
-- KEYS[6]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[7]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[8]  permits taken by edgelock callers and the waiter mark "edgelock_taken:{<name>}"
--          (STRING, see lib/taken.lua)
-- ARGV[1]  permits to give back (integer >= 1)
-- ARGV[2]  '1' allows a release beyond the permits set (Redisson's unbounded release), else '0'
-- ARGV[3]  replay window in ms
-- ARGV[4]  request id: a fresh one, or a permit handle's acquire's (acquire.lua)
-- Returns  {1, available after} released (also for a replay of an applied release)
--          | {0, available, set} refused: more than edgelock callers took, and available +
--            permits would exceed the permits set (set -1: none recorded and the semaphore
--            does not exist)
-- Records  "R" released, for one window (a refusal changes nothing and leaves the record as it
--          was)
-- Billed   EVALSHA, SET record GET, DECRBY count, INCRBY, PUBLISH: 5; with the waiter mark set,
--          also the hand-offs and wake-ups (lib/permit-hand-off.lua), one ZRANGE, and a DECRBY
--          and a SET of the count when permits were handed over
local name, limitKey, replayKey, _, channel, waiting, wake, takenKey = unpack(KEYS)
local permits = tonumber(ARGV[1])
local allowOver = ARGV[2] == '1'
local windowMs = tonumber(ARGV[3])
local id = ARGV[4]
-- @include lib/taken.lua
-- @include lib/permit-hand-off.lua

-- Recording first reads what was there in the same call; a refusal and a replay put it back.
local record = replayKey .. ':' .. id
local seen = redis.call('set', record, 'R', 'px', windowMs, 'get')
local function put_back()
  if seen then
    redis.call('set', record, seen, 'px', windowMs)
  else
    redis.call('del', record)
  end
end
-- No record, or its acquire's ("A<permits>"): the first copy. Anything else: a replay.
if seen and string.sub(seen, 1, 1) ~= 'A' then
  if seen ~= 'R' then
    put_back()
  end
  return {1, tonumber(redis.call('get', name)) or 0}
end

-- One DECRBY answers how many edgelock callers still hold and whether anyone may be waiting.
local taken, waiters = taken_decode(redis.call('decrby', takenKey, permits))
if taken < 0 then
  -- More than edgelock callers took (or than they hold now).
  if not allowOver then
    local got = redis.call('mget', name, limitKey)
    local available = tonumber(got[1])
    local limit = tonumber(got[2])
    -- A semaphore a Redisson client set has no recorded limit: its releases stay unbounded, as
    -- Redisson's are. One that was never set has nothing to give back to.
    if (limit == nil and available == nil)
        or (limit ~= nil and (available or 0) + permits > limit) then
      taken_write(taken + permits, waiters)
      put_back()
      return {0, available or 0, limit or -1}
    end
  end
  taken_write(0, waiters)
  taken = 0
end
local after = redis.call('incrby', name, permits)
if waiters then
  -- Hand-off (lib/permit-hand-off.lua): registered waiters hold the permits on the message;
  -- Redisson's channel then hears what is left.
  local handed = hand_off_permits(after, handed_as_acquired)
  if handed > 0 then
    after = redis.call('decrby', name, handed)
  end
  local still = taken_waiting()
  if handed > 0 or not still then
    taken_write(taken + handed, still)
  end
end
redis.call('publish', channel, after)
return {1, after}
