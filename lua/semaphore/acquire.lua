-- Take permits from a semaphore: Redisson RedissonSemaphore#tryAcquire (if the value is at least
-- `permits`, DECRBY), made replay-safe by a record per request id so an HTTP retry never takes
-- permits twice. A waiting call passes its waiter id: a busy attempt registers it, so a release
-- wakes it (lib/wake.lua), unless permits are missing that no edgelock caller took (or no
-- permits set is recorded, so nobody can tell): those are held by Redisson clients, whose
-- release publishes only on Redisson's channel, so the attempt says so (the waiter listens
-- there) and does not register.
-- KEYS[1]  semaphore name: STRING, available permits (Redisson layout; missing = 0)
-- KEYS[2]  replay records "edgelock_replay:{<name>}" (prefix: one STRING per request id)
-- KEYS[3]  unused (kept so that every script keeps its key positions)
-- KEYS[4]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[5]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[6]  permits taken by edgelock callers and the waiter mark "edgelock_taken:{<name>}"
--          (STRING, see lib/taken.lua)
-- KEYS[7]  permits set "edgelock_permits:{<name>}" (STRING: trySetPermits + addPermits)
-- ARGV[1]  permits to take (integer >= 1)
-- ARGV[2]  replay window in ms
-- ARGV[3]  request id (32 hex characters); the handle's release sends it again (release.lua)
-- ARGV[4]  waiter id of a call that blocks for a wake-up between attempts ('' = none)
-- ARGV[5]  with a waiter id: how long its registration lasts, in ms
-- ARGV[6]  '1': the waiter hears its wake channel, so a release may hand it the permits as this
--          attempt's (lib/permit-hand-off.lua); it then holds them on the release's message.
--          Anything else: it is only woken
-- ARGV[7]  request id of the call's previous attempt ('' = none): the only attempt whose
--          hand-off this one may take over
-- Returns  {1, available after} acquired (also for a replay of an applied attempt, and for an
--            attempt of a waiter that takes over permits a release handed it)
--          | {0, available, foreign} not enough permits; foreign 1 when no permits set is
--            recorded (a Redisson client set the semaphore, or nobody has) or the permits
--            missing from it are more than edgelock callers took, else 0
--          | {-1, 0} this request was cancelled (or its permits given back) before this copy
-- Records  "A<permits>" acquired, for one window (a cancel tombstone "C" written first, or the
--          handle's release "R", makes this a no-op)
-- Billed   EVALSHA, MGET (name, record, count, permits set), DECRBY, SET record PX, SET count:
--          5; with the waiter mark set, also the wake-ups and one ZRANGE
local name, replayKey, _, waiting, wake, takenKey, limitKey = unpack(KEYS)
local permits = tonumber(ARGV[1])
local windowMs = tonumber(ARGV[2])
local id = ARGV[3]
local waiter = ARGV[4]
-- @include lib/taken.lua
-- @include lib/permit-hand-off.lua

local record = replayKey .. ':' .. id
local read = {name, record, takenKey, limitKey}
if waiter ~= '' then
  read[5] = handed_key(waiter)
end
local got = redis.call('mget', unpack(read))
local available = tonumber(got[1]) or 0
local seen = got[2]
local taken, waiters = taken_decode(got[3])
local limit = tonumber(got[4])
if seen then
  if string.sub(seen, 1, 1) == 'A' then
    return {1, available}
  end
  return {-1, 0}
end

local from, n = handed_parse(got[5] or '')
if from ~= '' and from == ARGV[7] then
  -- A release handed this call permits as its previous attempt (lib/permit-hand-off.lua) that
  -- it has not taken (the message came after this attempt left, or while a cancel of the call
  -- was unanswered): this attempt takes them over under its own id, and the earlier one's
  -- record says they went. Only the attempt sent after that one may: a late copy of an older
  -- attempt would take over permits the call may hold on the message, and that attempt's
  -- cancel would then give them back under its holder.
  redis.call('del', read[5])
  local earlier = replayKey .. ':' .. from
  if redis.call('get', earlier) == 'A' .. n then
    redis.call('set', earlier, 'R', 'px', windowMs)
    redis.call('set', record, 'A' .. n, 'px', windowMs)
    return {1, available}
  end
end

if available < permits then
  if limit == nil or limit - available > taken then
    -- Without the mark nobody is registered: nothing to remove.
    if waiter ~= '' and waiters then
      waiting_remove(waiter)
    end
    return {0, available, 1}
  end
  if waiter ~= '' then
    waiting_add(waiter, tonumber(ARGV[5]), ARGV[6] == '1' and permit_grant(permits, id) or nil)
    if not waiters then
      taken_write(taken, true)
    end
  end
  return {0, available, 0}
end
local left = redis.call('decrby', name, permits)
redis.call('set', record, 'A' .. permits, 'px', windowMs)
if waiters then
  if waiter ~= '' then
    waiting_remove(waiter)
  end
  -- What is left may serve other waiters (a release may have woken fewer than it freed).
  if left > 0 then
    wake_n(left)
  end
  waiters = taken_waiting()
end
taken_write(taken + permits, waiters)
return {1, left}
