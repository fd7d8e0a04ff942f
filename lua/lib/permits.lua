-- Permits with leases (Redisson RPermitExpirableSemaphore layout). Included by scripts, which
-- define first:
--   name      semaphore name: STRING, available permits (KEYS)
--   timeouts  "{<name>}:timeout": ZSET permit id (16 raw bytes) -> expiry, epoch ms (KEYS)
--   channel   Redisson channel "redisson_sc:{<name>}" (KEYS)
--   marker    "edgelock_waiting:{<name>}:any": a STRING that lives at least as long as the last
--             waiter registration (KEYS), so that a script finding it absent (in an MGET it does
--             anyway) knows nobody is registered and leaves the registry alone
-- and the keys of lib/wake.lua, which this includes (wake_n, and the clock with it).
-- Permit ids travel as 32 hex characters and are stored as the 16 bytes they encode, as Redisson
-- stores them, so JVM clients see the same permits. edgelock's ids say whose they are and which
-- request took them: 22 random hex characters, the permit's index in its acquire (4, from 0001),
-- then edgelock's tag (6); the acquire's request id (the lease id) is the same with index 0000.
-- So a live permit without the tag is a Redisson client's (whose release publishes only on
-- Redisson's channel), with no record of edgelock's own permits to keep up to date, and a
-- release by id can tell the acquire that took the permit that it went (lib/replay.lua).
-- Provides NON_EXPIRABLE, permit_members, permits_of, permit_mine, permit_acquire_id, permits_held,
-- permits_live_scan, reclaim, handed_as_leased, give_back.
-- give_back hands what it frees to registered waiters (lib/permit-hand-off.lua, which this
-- includes, with lib/wake.lua): its scripts also define replayKey and windowMs first.
-- @include lib/permit-hand-off.lua

-- Redisson's score for a permit without a lease (about the year 31197): never expires.
local NON_EXPIRABLE = 922337203685477
-- The last 3 bytes of every edgelock permit id (hex "ed9e10"). A Redisson client's random id
-- ends so with a chance of 2^-24; such a permit would only be taken for edgelock's, so that a
-- waiter behind it registers instead of listening on Redisson's channel.
local PERMIT_TAG = string.char(0xed, 0x9e, 0x10)
-- Live permits read per call when a busy attempt looks for a Redisson client's.
local SCAN_PAGE = 1000

-- The permits named by ARGV[first..] (32 hex characters each), as stored (16 bytes each).
local function permit_members(first)
  local members = {}
  for i = first, #ARGV do
    members[#members + 1] = (string.gsub(ARGV[i], '..', function(cc)
      return string.char(tonumber(cc, 16))
    end))
  end
  return members
end

-- The `count` permits (as stored) that the acquire with request id `id` takes: its id with
-- the index 0001… in place of 0000.
local function permits_of(id, count)
  local members = {}
  for i = 1, count do
    local hex = string.sub(id, 1, 22) .. string.format('%04x', i) .. string.sub(id, 27)
    members[i] = (string.gsub(hex, '..', function(cc)
      return string.char(tonumber(cc, 16))
    end))
  end
  return members
end

-- Whether permit `member` (16 bytes) was taken by an edgelock caller.
local function permit_mine(member)
  return #member == 16 and string.sub(member, 14) == PERMIT_TAG
end

-- The request id (32 hex characters) of the acquire that took edgelock permit `member`.
local function permit_acquire_id(member)
  local hex = string.gsub(member, '.', function(c)
    return string.format('%02x', string.byte(c))
  end)
  return string.sub(hex, 1, 22) .. '0000' .. string.sub(hex, 27)
end

-- How many of `members` are taken (in the ZSET), and how many of those have a lease still
-- running at `now`: one ZMSCORE.
local function permits_held(members, now)
  local present, live = 0, 0
  for _, score in ipairs(redis.call('zmscore', timeouts, unpack(members))) do
    if score then
      present = present + 1
      if tonumber(score) > now then
        live = live + 1
      end
    end
  end
  return present, live
end

-- Looks through the live permits (a page of SCAN_PAGE per call, usually one call): whether one
-- is a Redisson client's, and the ms until the next lease runs out (-1: none will).
local function permits_live_scan(now)
  local offset, next = 0, -1
  while true do
    -- The bound is a string: Lua would print the number as 1.7e+12 or so.
    local page = redis.call('zrangebyscore', timeouts, '(' .. now, '+inf', 'withscores', 'limit',
      offset, SCAN_PAGE)
    for i = 1, #page, 2 do
      local score = tonumber(page[i + 1])
      -- Sorted by expiry: the first lease of the first page runs out first.
      if offset == 0 and i == 1 and score < NON_EXPIRABLE then
        next = score - now
      end
      if not permit_mine(page[i]) then
        return true, next
      end
    end
    if #page < 2 * SCAN_PAGE then
      return false, next
    end
    offset = offset + SCAN_PAGE
  end
end

-- Returns every permit whose lease ran out by `now` to the pool (all of them, where Redisson
-- returns as many as it asks for), publishes the count on Redisson's channel and wakes the
-- registered waiters it can serve (`waiters`: the marker's value, false when absent). Returns
-- the available permits after, or nil when none had run out.
local function reclaim(now, waiters)
  local expired = redis.call('zremrangebyscore', timeouts, 0, now)
  if expired > 0 then
    local available = redis.call('incrby', name, expired)
    redis.call('publish', channel, available)
    if waiters then
      wake_n(available)
    end
    return available
  end
end

-- The permit-expirable semaphore's give (lib/permit-hand-off.lua): the `count` permits of the
-- busy attempt `id` (lib/permits.lua's ids: index 0001…), taken with a lease of `rest`'s ms
-- ("|<ms>": the waiter's lease, at most the claim window; its lease confirms the rest), so the
-- permits are that attempt's own record (a late copy of it finds them) and a waiter that never
-- takes them loses them when that lease runs out.
local function handed_as_leased(_, count, id, rest)
  local expiry = clock_ms() + tonumber(string.sub(rest, 2))
  local scored = {'nx'}
  for _, member in ipairs(permits_of(id, count)) do
    scored[#scored + 1] = expiry
    scored[#scored + 1] = member
  end
  redis.call('zadd', timeouts, unpack(scored))
end

-- Gives the taken permits among `members` back to the pool and hands them to the registered
-- waiters that asked for them (`waiters` as for reclaim; lib/permit-hand-off.lua), the others
-- being woken; then publishes what is left on Redisson's channel. Returns how many were taken.
local function give_back(members, waiters)
  local removed = redis.call('zrem', timeouts, unpack(members))
  if removed > 0 then
    local available = redis.call('incrby', name, removed)
    if waiters then
      local handed = hand_off_permits(available, handed_as_leased)
      if handed > 0 then
        available = redis.call('decrby', name, handed)
      end
    end
    redis.call('publish', channel, available)
  end
  return removed
end
