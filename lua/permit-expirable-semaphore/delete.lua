-- Delete a permit-expirable semaphore: its permits, their leases and the permits set (Redisson
-- RObject#delete covers both of its keys). Waiters keep waiting until it is set again (their
-- registry and its marker stay). Each acquire whose edgelock permits go is told so (a late copy
-- of it then takes nothing, even once the semaphore is set again).
-- KEYS[1]  semaphore name (STRING, available permits)
-- KEYS[2]  permit leases "{<name>}:timeout" (ZSET)
-- KEYS[3]  permits set "edgelock_permits:{<name>}" (STRING)
-- KEYS[4]  replay records "edgelock_replay:{<name>}" (prefix, lib/replay.lua)
-- ARGV[1]  replay window in ms
-- Returns  1 if the semaphore existed, else 0
-- Records  "G" under the request id of each acquire whose edgelock permits were taken
-- Billed   EVALSHA, ZRANGE, EXISTS, DEL, plus a SET per acquire whose permits were taken
local name, timeouts, limit, replayKey = unpack(KEYS)
local windowMs = tonumber(ARGV[1])
-- @include lib/replay.lua
-- @include lib/permits.lua

local told = {}
for _, member in ipairs(redis.call('zrange', timeouts, 0, -1)) do
  if permit_mine(member) then
    local by = permit_acquire_id(member)
    if not told[by] then
      told[by] = true
      replay_set(by, 'G')
    end
  end
end
local existed = redis.call('exists', name)
redis.call('del', name, timeouts, limit)
return existed
