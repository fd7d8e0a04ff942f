-- Replay records of one name: what each request id did, so that a request applied twice (an
-- HTTP retry after a lost answer) has the effect of once. Included by scripts, which define
-- first:
--   replayKey  "edgelock_replay:{<name>}"      HASH of current records (KEYS)
--   replayOld  "edgelock_replay:{<name>}:old"  HASH of the records before them (KEYS)
--   windowMs   replay window in ms: how long a request can still be in flight (ARGV)
-- A record lives at least windowMs and at most about 3 × windowMs, in two keys per name
-- whatever the traffic: records go to the current hash; once that hash is older than the
-- window (server time, field '#t') it becomes the old one and a new current hash starts.
-- Provides replay_get(id), replay_set(id, state), replay_once(id, letter, apply); includes
-- lib/clock.lua.
-- @include lib/clock.lua

local function replay_get(id)
  local state = redis.call('hget', replayKey, id)
  if state then
    return state
  end
  return redis.call('hget', replayOld, id)
end

local function replay_set(id, state)
  local now = clock_ms()
  local started = tonumber(redis.call('hget', replayKey, '#t'))
  if started and now - started >= windowMs then
    redis.call('rename', replayKey, replayOld)
    redis.call('pexpire', replayOld, windowMs)
    started = nil
  end
  if not started then
    redis.call('hset', replayKey, '#t', now)
  end
  redis.call('hset', replayKey, id, state)
  redis.call('pexpire', replayKey, 2 * windowMs)
end

-- Runs apply() once per request id and returns what it returns, a number, recorded as
-- "<letter><number>": a replay answers the first copy's number (0 for a record without one)
-- and applies nothing.
local function replay_once(id, letter, apply)
  local seen = replay_get(id)
  if seen then
    return tonumber(string.sub(seen, 2)) or 0
  end
  local result = apply()
  replay_set(id, letter .. result)
  return result
end
