-- Take permits with leases: Redisson RedissonPermitExpirableSemaphore#tryAcquireAsync (take
-- `permits` if available, each id scored with its expiry, the leases following the semaphore's
-- TTL), with server time instead of the client's clock, expired permits reclaimed (all of them)
-- when the available ones are not enough rather than up to `permits` first, and replay safety:
-- an HTTP retry never takes permits twice. A busy attempt registers the caller's waiter id
-- (lib/wake.lua) and reports when the next lease runs out, which bounds its wait (an expiring
-- permit wakes nobody by itself); while a Redisson client holds a live permit, whose release
-- publishes only on Redisson's channel, it says so instead of registering (the waiter listens
-- there).
-- KEYS[1]  semaphore name: STRING, available permits (Redisson layout; missing = 0)
-- KEYS[2]  permit leases "{<name>}:timeout" (ZSET id bytes -> expiry ms)
-- KEYS[3]  replay records "edgelock_replay:{<name>}" (prefix: one STRING per request id)
-- KEYS[4]  unused (kept so that every script keeps its key positions)
-- KEYS[5]  Redisson channel "redisson_sc:{<name>}"
-- KEYS[6]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[7]  waiters' wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[8]  waiters' marker "edgelock_waiting:{<name>}:any" (STRING, lib/permits.lua)
-- ARGV[1]  lease of each permit in ms
-- ARGV[2]  replay window in ms
-- ARGV[3]  request id (32 hex characters: lib/permits.lua's id with index 0000)
-- ARGV[4]  waiter id of a call that blocks for a wake-up between attempts ('' = none)
-- ARGV[5]  with a waiter id: how long its registration lasts, in ms
-- ARGV[6]  with a waiter id that hears its wake channel: the lease in ms, at most the claim
--          window, with which a release may hand it the permits as this attempt's
--          (lib/permit-hand-off.lua, lib/permits.lua handed_as_leased); it then holds them on
--          the release's message. '0': it is only woken
-- ARGV[7]  request id of the call's previous attempt ('' = none): the only attempt whose
--          hand-off this one may take over
-- ARGV[8…] permit ids, 32 hex characters each (one per permit to take; lib/permits.lua's ids
--          of this request)
-- Returns  {1, available after} acquired (also for a replay whose permits are all still held,
--            and for an attempt that takes over permits a release handed an earlier attempt of
--            the same waiting call, which it did not hold on the message)
--          | {0, ms until the next lease runs out (-1: none will), foreign} not enough
--            permits; foreign 1 when a Redisson client holds a live permit, else 0
--          | {-1, 0} this request was cancelled, or the permits it took are gone
-- Records  "A" when the lease is shorter than the replay window (the permits may be gone while a
--          copy of this request is still in flight); otherwise the permits are their own record
--          (ZADD NX finds them), and whoever removes them first records that under this
--          request id (the lease's release "R<n>", a release by id or delete "G", a cancel "U").
--          Any record found first (a cancel's tombstone "C" too) makes this a no-op.
-- Billed   permits available: EVALSHA, TIME, MGET, ZADD, DECRBY, PTTL, plus SET for a lease
--          shorter than the replay window (7)
--          taking over a hand-off: EVALSHA, TIME, MGET, DEL, ZMSCORE, ZREM, ZADD, SET, plus SET
--          for a lease shorter than the replay window and the waiter's unregistering
local name, timeouts, replayKey, _, channel, waiting, wake, marker = unpack(KEYS)
local leaseMs = tonumber(ARGV[1])
local windowMs = tonumber(ARGV[2])
local id = ARGV[3]
local waiter = ARGV[4]
local waitMs = tonumber(ARGV[5])
-- @include lib/replay.lua
-- @include lib/wake.lua
-- @include lib/permits.lua

local now = clock_ms()
local handOffMs = tonumber(ARGV[6])
local members = permit_members(8)

-- Makes the leases of `members` (all taken) at least leaseMs from now, never shortening one.
local function lease_at_least(taken)
  local scored = {'xx', 'gt'}
  for _, member in ipairs(taken) do
    scored[#scored + 1] = now + leaseMs
    scored[#scored + 1] = member
  end
  redis.call('zadd', timeouts, unpack(scored))
end

local count = #members
-- One read for the pool, this request's record, whether anyone waits and what a release handed
-- this call.
local read = {name, replayKey .. ':' .. id, marker}
if waiter ~= '' then
  read[4] = handed_key(waiter)
end
local state = redis.call('mget', unpack(read))
local available, seen, waiters = tonumber(state[1]) or 0, state[2], state[3]

if seen then
  if seen == 'A' then
    local _, live = permits_held(members, now)
    if live == count then
      return {1, available}
    end
  end
  return {-1, 0}
end

if state[4] then
  -- A release handed this call permits as an earlier attempt of it (lib/permit-hand-off.lua)
  -- that it did not hold on the message (the message named an attempt it no longer waited on,
  -- or too little of the hand-off's lease was known to be left): this attempt takes them over
  -- under its own permit ids and lease instead of leaving them to run out with their claim
  -- window, and the earlier attempt's record says they went (its late copy and its cancel
  -- then find nothing). Only the attempt sent after that one may: a late copy of an older
  -- attempt would take over permits the call may hold on the message, and its cancel would
  -- then give them back under their holder.
  local from, n = handed_parse(state[4])
  if from ~= '' and from == ARGV[7] and n == count then
    redis.call('del', read[4])
    local earlier = permits_of(from, count)
    local _, live = permits_held(earlier, now)
    if live == count then
      redis.call('zrem', timeouts, unpack(earlier))
      local scored = {}
      for _, member in ipairs(members) do
        scored[#scored + 1] = now + leaseMs
        scored[#scored + 1] = member
      end
      redis.call('zadd', timeouts, unpack(scored))
      replay_set(from, 'U')
      if leaseMs < windowMs then
        replay_set(id, 'A')
      end
      if waiters then
        waiting_remove(waiter)
      end
      return {1, available}
    end
  end
end

if available < count then
  -- Without a record, a copy of an acquire that applied finds the permits it took.
  local present, live = permits_held(members, now)
  if present > 0 then
    if live < count then
      return {-1, 0}
    end
    -- Its lease runs from when it was sent: a release may have handed these permits to its
    -- waiter with a shorter one (lib/permit-hand-off.lua), which this answer must not outlive.
    lease_at_least(members)
    return {1, available}
  end
  available = reclaim(now, waiters) or available
  if available < count then
    local foreign, next = permits_live_scan(now)
    if waiter ~= '' then
      if not foreign then
        waiting_add(waiter, waitMs, handOffMs > 0 and permit_grant(count, id, '|' .. handOffMs) or nil)
        waiting_mark(waitMs)
      elseif waiters then
        waiting_remove(waiter)
      end
    end
    return {0, next, foreign and 1 or 0}
  end
end

if waiter ~= '' and waiters then
  waiting_remove(waiter)
end
local scored = {'nx'}
for _, member in ipairs(members) do
  scored[#scored + 1] = now + leaseMs
  scored[#scored + 1] = member
end
local added = redis.call('zadd', timeouts, unpack(scored))
if added == 0 then
  -- A copy of an acquire that applied: its permits are all there (as above).
  lease_at_least(members)
  return {1, available}
end
-- Fewer than `count` only for a copy whose first took permits that a Redisson client removed
-- since (edgelock's removals leave a record): the ones it takes again are counted.
local left = redis.call('decrby', name, added)
-- The leases follow the semaphore's own TTL, if it has one (Redisson does the same).
local ttl = redis.call('pttl', name)
if ttl > 0 then
  redis.call('pexpire', timeouts, ttl)
end
if leaseMs < windowMs then
  replay_set(id, 'A')
end
-- What is left may serve other waiters (a release may have woken fewer than it freed).
if left > 0 and waiters then
  wake_n(left)
end
return {1, left}
