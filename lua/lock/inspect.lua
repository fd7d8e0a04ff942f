-- Read the state of a lock in one request (Redisson's isLocked / isHeldByThread /
-- getHoldCount / remainTimeToLive are EXISTS, HEXISTS, HGET and PTTL). Read-only.
-- KEYS[1]  lock name (HASH)
-- ARGV[1]  owner field to count holds for ("" = none)
-- Returns  {exists 0|1, pttl in ms (-2 absent, -1 no TTL), hold count of ARGV[1]}
local name = KEYS[1]
local owner = ARGV[1]
local count = 0
if owner ~= '' then
  count = tonumber(redis.call('hget', name, owner) or '0')
end
return {redis.call('exists', name), redis.call('pttl', name), count}
