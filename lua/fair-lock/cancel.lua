-- A waiter leaves: it gave up (waitTime spent), was aborted, or an attempt's answer never
-- arrived. Takes it out of the queue, passes on a hand-off it never confirmed, and undoes a hold
-- its unanswered attempt made (only in the incarnation that attempt joined). Redisson
-- RedissonFairLock#acquireFailed plus the reentrant lock's cancel.
-- KEYS[1..7]  as lua/fair-lock/acquire.lua
-- ARGV[1]  owner field of the waiter
-- ARGV[2]  replay window in ms
-- ARGV[3]  request id of its last attempt
-- ARGV[4]  claim window in ms of a hand-off this makes
-- ARGV[5]  waiter id of the acquire call that gives up
-- Returns  0 nothing held (left the queue; a late attempt with that id is a no-op)
--          | 1 a hand-off or a hold it made was given back | 2 already cancelled
-- Records  "C" (before the attempt applied) | "U" (undone). A lock found free afterwards is
--          handed to the next waiter (this one may have been first in line); a held one's next
--          waiter is told when this one was first. An attempt that
--          created the lock left no record (lua/fair-lock/acquire.lua): the lock's BY field
--          naming it is its record, and its hold is undone too.
-- Not lib/cancel.lua's cancel-or-undo: a waiter leaves the queue and gives back a hand-off
-- whatever its last attempt's record is (queued "Q", busy "B", applied, or none yet), and the
-- answer says what it gave back, not what the record was.
local name, queue, slots, waiters, channel, replayKey, _ = unpack(KEYS)
local owner = ARGV[1]
local windowMs = tonumber(ARGV[2])
local id = ARGV[3]
local claimMs = tonumber(ARGV[4])
local waiter = ARGV[5]
-- @include lib/release.lua
-- @include lib/fair.lua

local seen = replay_get(id)
local kind = seen and string.sub(seen, 1, 1)
if kind == 'C' or kind == 'U' then
  return 2
end
-- A queued waiter behind another is not bounded by the holder's lease (the first one takes an
-- expired lock and hands it on), so when the first one leaves a held lock, the next one (ours)
-- is told (its id, no grant): its next attempt finds itself first, and from then on it comes
-- back at the holder's expiry rather than at its own bound.
local wasFirst = redis.call('lindex', queue, 0) == owner
leave(owner)
local result = 0
local s = redis.call('hmget', name, owner, EPOCH, BY, GRANT)
-- Only the incarnation the attempt joined holds its hold; a later one belongs to later calls.
-- An attempt that created the lock left no record: the lock's BY field names it.
local undo = s[1] and ((kind == 'A' and string.sub(seen, 2) == (s[2] or ''))
  or (not seen and s[3] == id))
if s[4] == waiter or undo then
  drop_hold()
  result = 1
end
if redis.call('exists', name) == 0 then
  hand_off()
elseif wasFirst then
  local head = redis.call('lindex', queue, 0)
  local next_waiter = head and waiter_of(head)
  if next_waiter then
    redis.call('publish', fair_wake_channel(next_waiter), next_waiter)
  end
end
replay_set(id, seen and 'U' or 'C')
return result
