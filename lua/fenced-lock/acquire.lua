-- Acquire (or re-enter) a fenced lock and take a fencing token: Redisson
-- RedissonFencedLock#tryLockAndGetToken (the reentrant lock's acquire plus a token on every
-- grant, re-entries included), replay-safe like lua/lock/acquire.lua, whose taking of the lock
-- it shares (lib/reentrant.lua). Release, renew, cancel and force-unlock are the reentrant
-- lock's scripts (Redisson inherits them too).
-- Token rule: token = INCR of the token key (Redisson's own rule), except that a counter that
-- starts afresh (the INCR answers less than FLOOR: Redis lost the key, by a restart without
-- persistence, FLUSHALL or DEL, or only Redisson clients counted so far) jumps to the server
-- time in microseconds. Strictly increasing while the key lives; after a loss the next token is
-- later than every token issued before as long as grants came at less than one per microsecond
-- on average since the counter last started, and the server's clock has not gone back further
-- than Redis was down. A JVM Redisson client INCRs the same key, which keeps the order.
-- KEYS[1]  lock name: HASH, field = owner, value = hold count (Redisson layout) + lib/hold.lua's
--          fields (the creating acquire's token in TOKEN)
-- KEYS[2]  replay records "edgelock_replay:{<name>}" (prefix: one STRING per request id)
-- KEYS[3]  unused (kept so that every lock script keeps its key positions)
-- KEYS[4]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[5]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[6]  token "redisson_lock_token:{<name>}" (STRING integer, no TTL, as Redisson's)
-- ARGV[1]  leaseTime in ms (the lock's TTL becomes at least this; it is never shortened)
-- ARGV[2]  owner field "<clientId>:<taskId>"
-- ARGV[3]  replay window in ms
-- ARGV[4]  request id (32 hex characters; becomes the lease id)
-- ARGV[5]  waiter id of a call that blocks for a wake-up between attempts ('' = none)
-- ARGV[6]  with a waiter id: how long its registration lasts, in ms
-- ARGV[7]  unused (the reentrant lock's hand-off flag: a fenced lock's waiters are only woken)
-- ARGV[8]  '0' when the waiter cannot be registered yet (as lua/lock/acquire.lua)
-- Returns  {1, holdCount, epoch, token} acquired | {0, pttl, jvm, 0} held by another owner (jvm as in
--          lua/lock/acquire.lua)
--          | {-1, 0, 0, 0} this request was cancelled, or the hold it made is already gone
-- Records  "A<epoch>:<token>" where lua/lock/acquire.lua records "A<epoch>"; a lock it creates
--          keeps its token in the HASH: a replay of a grant returns the same token
-- Billed   free lock, nobody waiting: EVALSHA, EXISTS, INCR, HSET, PEXPIRE (5)
-- KEYS[1..5], ARGV[1..6] and ARGV[8] are bound by lib/reentrant.lua (lib/reentrant-args.lua).
-- @include lib/reentrant.lua
local tokenKey = KEYS[6]
-- Every token issued from a clock floor is at least this (server time in microseconds in 2001).
local FLOOR = 1e15

-- The next token, as a decimal string.
local function next_token()
  local token = redis.call('incr', tokenKey)
  if token < FLOOR then
    token = math.max(token, tonumber(clock_us()))
    redis.call('set', tokenKey, string.format('%.0f', token))
  end
  return string.format('%.0f', token)
end

if hold_free() then
  local token = next_token()
  local e = hold_create({TOKEN, token}, ':' .. token)
  return {1, 1, tonumber(e) or 0, tonumber(token)}
end

local seen = hold_seen() and replay_get(id)
if seen then
  -- A replay of a grant returns the token it granted.
  local made, token = string.match(seen, '^A([^:]*):(%d+)$')
  local count = hold_replayed(made, hold_state())
  if count then
    return {1, count, tonumber(made) or 0, tonumber(token)}
  end
  return {-1, 0, 0, 0}
end

if hold_absent() then
  -- Free, with waiters registered: its release must look for them.
  local token = next_token()
  local e = hold_create({TOKEN, token}, ':' .. token, true)
  return {1, 1, tonumber(e) or 0, tonumber(token)}
end
local s = hold_state()
if s.by == id then
  -- A copy of the acquire that created this incarnation: the hold is its record.
  return {1, s.count or 0, tonumber(s.epoch) or 0, tonumber(s.token) or 0}
end
if not s.count then
  local _, pttl, jvm = hold_acquire(s)
  return {0, pttl, jvm, 0}
end
local token = next_token()
local e, count = hold_acquire(s, ':' .. token)
return {1, count, tonumber(e) or 0, tonumber(token)}
