-- Acquire (or re-enter) a fenced lock and take a fencing token: Redisson
-- RedissonFencedLock#tryLockAndGetToken (the reentrant lock's acquire plus a token on every
-- grant, re-entries included), replay-safe like lua/lock/acquire.lua, whose taking of the lock
-- it shares (lib/reentrant.lua). Release, renew, cancel and force-unlock are the reentrant
-- lock's scripts (Redisson inherits them too).
-- Token rule: token = max(last token + 1, server time in microseconds), stored at the token
-- key. Strictly increasing while the key lives; if Redis loses it (restart without
-- persistence, FLUSHALL, DEL), the next token is the server time, which is later than every
-- token issued before as long as the server's clock has not gone back further than Redis was
-- down (a token leads the clock by at most one microsecond per grant made within the same
-- microsecond). A JVM Redisson client INCRs the same key, which keeps the order.
-- KEYS[1]  lock name: HASH, field = owner, value = hold count (Redisson layout) + epoch field
-- KEYS[2]  replay records "edgelock_replay:{<name>}" (HASH request id -> state)
-- KEYS[3]  older replay records "edgelock_replay:{<name>}:old"
-- KEYS[4]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[5]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- KEYS[6]  token "redisson_lock_token:{<name>}" (STRING integer, no TTL, as Redisson's)
-- ARGV[1]  leaseTime in ms (the lock's TTL becomes at least this; it is never shortened)
-- ARGV[2]  owner field "<clientId>:<taskId>"
-- ARGV[3]  replay window in ms
-- ARGV[4]  request id (32 hex characters; becomes the lease id)
-- ARGV[5]  waiter id of a call that blocks for a wake-up between attempts ('' = none)
-- ARGV[6]  with a waiter id: how long its registration lasts, in ms
-- Returns  {1, holdCount, epoch, token} acquired | {0, pttl, jvm, 0} held by another owner (jvm as in
--          lua/lock/acquire.lua)
--          | {-1, 0, 0, 0} this request was cancelled, or the hold it made is already gone
-- Records  "A<epoch>:<token>": a replay of a grant returns the same token
-- KEYS[1..5] and ARGV[1..6] are bound by lib/reentrant.lua (lib/reentrant-args.lua).
-- @include lib/reentrant.lua
-- @include lib/replay.lua
local tokenKey = KEYS[6]

local seen = replay_get(id)
if seen then
  -- A replay of a grant returns the token it granted.
  local made, token = string.match(seen, '^A([^:]*):(%d+)$')
  local count = hold_replayed(made)
  if count then
    return {1, count, tonumber(made) or 0, tonumber(token)}
  end
  return {-1, 0, 0, 0}
end

-- No hand-offs: a fenced lock's waiters are only woken, and take the lock (and a token) here.
local e, count, jvm = hold_acquire(false)
if not e then
  -- `count` is the holder's pttl here.
  return {0, count, jvm, 0}
end
-- Microseconds since 1970 are about 1.8e15: exact in Lua's doubles and a safe integer in JS.
local now = tonumber(clock_us())
local token = math.max(tonumber(redis.call('get', tokenKey) or '0') + 1, now)
local text = string.format('%.0f', token)
redis.call('set', tokenKey, text)
replay_set(id, 'A' .. e .. ':' .. text)
return {1, count, tonumber(e) or 0, token}
