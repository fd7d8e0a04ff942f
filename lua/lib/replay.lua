-- Replay records of one name: what a request id did, so that a request applied twice (an HTTP
-- retry after a lost answer) has the effect of once. Included by scripts, which define first:
--   replayKey  "edgelock_replay:{<name>}"  prefix of the records (KEYS, for the hash slot)
--   windowMs   replay window in ms: how long a request can still be in flight (ARGV)
-- A record is a STRING "edgelock_replay:{<name>}:<id>" that lives exactly windowMs (PX): one
-- SET to write, one GET to read, and nothing to rotate or trim. Scripts write a record only where
-- nothing else tells a replay what the first copy did (a hold records itself in its lock HASH):
-- most operations on their common path write none.
-- Provides replay_key(id), replay_get(id), replay_set(id, state), replay_once(id, letter,
-- apply). Includes nothing, so that a script's common path can write its record before the rest
-- of the script is defined (lib/reentrant-free.lua, lib/release-free.lua).

local function replay_key(id)
  return replayKey .. ':' .. id
end

local function replay_get(id)
  return redis.call('get', replay_key(id))
end

local function replay_set(id, state)
  redis.call('set', replay_key(id), state, 'px', windowMs)
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
