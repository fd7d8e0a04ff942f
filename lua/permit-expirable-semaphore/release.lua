-- Give permits back by id: Redisson RedissonPermitExpirableSemaphore#tryReleaseAsync, made
-- replay-safe (a resent release answers what the first copy did). A permit whose lease ran out
-- counts as not held, as in Redisson, and is given back all the same if nobody reclaimed it yet
-- (until then nobody else could take it).
-- KEYS[1]  semaphore name (STRING, available permits)
-- KEYS[2]  permit leases "{<name>}:timeout" (ZSET id bytes -> expiry ms)
-- KEYS[3]  replay records "edgelock_replay:{<name>}"
-- KEYS[4]  unused (kept so that every script keeps its key positions)
-- KEYS[5]  Redisson channel "redisson_sc:{<name>}"
-- KEYS[6]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[7]  waiters' wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[8]  waiters' marker "edgelock_waiting:{<name>}:any" (STRING, lib/permits.lua)
-- ARGV[1]  replay window in ms
-- ARGV[2]  request id of this release: a lease's release is its lease id, which is the id of
--          the acquire that took the permits (so its record also tells a late copy of that
--          acquire that they went); a release by id has its own
-- ARGV[3]  '1': read each permit's expiry (a release by id, or a lease the caller's clock says
--          may have run out); '0': the caller's lease has not run out (its expiresAt is never
--          after Redis's expiry), so a permit still taken is held
-- ARGV[4…] permit ids, 32 hex characters each
-- Returns  how many of the permits were held (every one still taken is now back in the pool)
-- Records  "R<count>" under the request id; "G" under the id of the acquire that took a permit
--          released by another request (a late copy of that acquire then takes nothing)
-- Billed   a lease's release: EVALSHA, MGET, ZREM, INCRBY, PUBLISH, SET (6), plus the waiter
--          registry (lib/wake.lua) when the marker says someone is registered
local name, timeouts, replayKey, _, channel, waiting, wake, marker = unpack(KEYS)
local windowMs = tonumber(ARGV[1])
local id = ARGV[2]
local check = ARGV[3] == '1'
-- @include lib/replay.lua
-- @include lib/wake.lua
-- @include lib/permits.lua

local state = redis.call('mget', replayKey .. ':' .. id, marker)
local seen, waiters = state[1], state[2]
if seen and string.sub(seen, 1, 1) == 'R' then
  return tonumber(string.sub(seen, 2)) or 0
end

local members = permit_members(4)
local held
if check then
  local _, live = permits_held(members, clock_ms())
  held = live
end
local removed = give_back(members, waiters)
held = held or removed
replay_set(id, 'R' .. held)
if removed > 0 then
  for _, member in ipairs(members) do
    if permit_mine(member) then
      local by = permit_acquire_id(member)
      if by ~= id then
        replay_set(by, 'G')
      end
    end
  end
end
return held
