-- Giving back holds of a lock HASH (Redisson layout, lib/hold.lua's epoch): what the releases
-- and cancels of the reentrant, fair and read-write locks share. Included by those scripts,
-- which define first:
--   name     the lock (KEYS)
--   channel  Redisson's unlock channel (KEYS): hears 0 when a hold's going frees the lock
--   owner    the owner field whose hold goes (ARGV)
-- and, for release_refused and release_hold, a release's
--   id       its request id (ARGV): its replay record "R<result>" (lib/replay.lua's keys and
--            window too)
--   held     the epoch of the hold being released, decimal ("0" = any hold of the owner) (ARGV)
--   leaseMs  the TTL to restore on a partial release, never shortening (0 = keep it) (ARGV)
-- (lib/release-args.lua binds these three for the reentrant and fair locks).
-- Includes lib/release-free.lua (release_read, release_plain, release_last), lib/replay.lua
-- and lib/hold.lua. Provides drop_hold, release_refused, release_hold.
-- @include lib/release-free.lua
-- @include lib/replay.lua
-- @include lib/hold.lua

-- Takes one hold of `owner` away; the last deletes the lock and tells Redisson's waiters.
-- Returns true when the lock was freed (nil when holds are left).
local function drop_hold()
  if redis.call('hincrby', name, owner, -1) <= 0 then
    redis.call('del', name)
    redis.call('publish', channel, 0)
    return true
  end
end

-- The answer of a release of `field` that changes nothing, or nil when it goes ahead: a replay
-- answers what the first copy did; 3 when another owner holds the lock; 0 when the hold is older
-- than the incarnation current() returns, or when the lock is gone: then gone(), if given, runs
-- and the 0 is recorded, so that a replay arriving after what it did still answers 0, not "not
-- owner".
local function release_refused(field, current, gone)
  local seen = replay_get(id)
  if seen and string.sub(seen, 1, 1) == 'R' then
    return tonumber(string.sub(seen, 2))
  end
  if redis.call('hexists', name, field) == 1 then
    if held == '0' or held == current() then
      return
    end
  elseif redis.call('exists', name) == 1 then
    return 3
  elseif gone then
    gone()
    replay_set(id, 'R0')
  end
  return 0
end

-- Releases one hold of `owner` (Redisson RedissonLock#unlockInnerAsync): 1 released, the lock
-- freed, after which freed() runs | 2 still held, its TTL at least leaseMs | what
-- release_refused answers (gone as there). Records "R1" or "R2".
-- The common path (the owner holds the lock in the incarnation `held` names, and no release of
-- this incarnation left holds behind) reads the HASH once (HMGET) and no record: a release that
-- already applied in this incarnation either deleted the lock (then this is another
-- incarnation) or left holds behind, which set PARTIAL; only then, or when the lock is not as
-- expected, is the record read. A release that deletes the lock records "R1" (a copy arriving
-- later answers it, and a late copy of the acquire of the same lease finds it and does
-- nothing), and "G" for the acquire that created the lock when that was another request
-- (release_last). freed(waited) gets the lock's WAITERS field (lib/hold.lua; false without it,
-- when no waiter can be registered, so the reentrant lock's release reads no registry), as
-- release_last says. `s`: release_read()'s answer when the caller read it first (else read here).
-- Billed   freeing the lock: HMGET, DEL, SET, plus what freed() calls, plus PUBLISH unless freed()
--          handed the lock on
local function release_hold(freed, gone, s)
  s = s or release_read()
  local count, current = tonumber(s[1]), s[2] or ''
  if not count or s[4] or held == '0' or held ~= current then
    local refused = release_refused(owner, epoch, gone)
    if refused then
      return refused
    end
  end
  if count <= 1 then
    return release_last(s, freed)
  end
  redis.call('hincrby', name, owner, -1)
  redis.call('hset', name, PARTIAL, 1)
  if leaseMs > 0 then
    extend(leaseMs)
  end
  replay_set(id, 'R2')
  return 2
end
