-- The common path of a release of a lock HASH (lib/release.lua builds the rest on it): reading
-- the HASH, and freeing the lock when the release takes its last hold. Kept apart, with nothing
-- but lib/hold-fields.lua and lib/replay.lua under it, so that a release can free a lock before
-- the rest of the script is defined (lib/reentrant-free.lua says why). lua/lock/release.lua goes
-- further and writes release_read, release_plain and release_last out for that case before
-- anything is defined: a change to them here is a change there too. Included by
-- scripts that define first name, replayKey and channel (KEYS, as lib/release.lua and
-- lib/replay.lua say) and the release's arguments (lib/release-args.lua: owner, windowMs, id,
-- held). Includes lib/hold-fields.lua and lib/replay.lua. Provides release_read, release_plain,
-- release_last (below).
-- @include lib/hold-fields.lua
-- @include lib/replay.lua

-- The lock HASH's fields a release reads, in one HMGET: the hold count of `owner`, EPOCH, BY,
-- PARTIAL and WAITERS (lib/release.lua, release_hold, says what each is for).
local function release_read()
  return redis.call('hmget', name, owner, EPOCH, BY, PARTIAL, WAITERS)
end

-- True when release_read's answer `s` shows the owner's only hold, in the incarnation `held`
-- names ("0", any hold, names none: no epoch is 0), with no release of that incarnation having
-- left holds behind (no PARTIAL): the release then frees the lock reading no record
-- (lib/release.lua, release_hold).
local function release_plain(s)
  return s[1] == '1' and not s[4] and held == s[2]
end

-- Frees the lock its release took the last hold of (`s`: release_read's answer) and returns 1.
-- Records "R1" for the release (a copy arriving later answers it, and a late copy of the
-- acquire of the same lease finds it and does nothing) and "G" for the acquire that created the
-- lock when that was another request. freed(waited), if given, gets
-- the WAITERS field; it returns true when it handed the lock on to a waiter: then Redisson's
-- channel hears nothing, since the lock never became free.
-- Billed   DEL, SET (+ SET of "G"), plus what freed() calls, plus PUBLISH unless freed() handed
--          the lock on
local function release_last(s, freed)
  redis.call('del', name)
  replay_set(id, 'R1')
  local by = s[3]
  if by and by ~= id then
    replay_set(by, 'G')
  end
  if not (freed and freed(s[5])) then
    redis.call('publish', channel, 0)
  end
  return 1
end
