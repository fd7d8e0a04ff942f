-- Helpers for a read-write lock (Redisson RedissonReadWriteLock's layout). Included by scripts,
-- which define first:
--   name     the lock name (KEYS): HASH with field 'mode' = 'read' | 'write', reader fields
--            <owner> = read hold count, writer fields <owner>:write = write hold count, and
--            nothing else: Redisson's scripts count the fields (a read lock is locked in write
--            mode when HLEN > 2; the last write unlock deletes the hash when HLEN == 1)
--   prefix   "{<name>}" (KEYS): each read hold k of an owner has its own timeout key
--            "{<name>}:<owner>:rwlock_timeout:<k>" (STRING "1" with PX = that hold's lease), so
--            a crashed reader's holds expire on their own
--   channel  Redisson's "redisson_rwlock:{<name>}" (KEYS), and waiting / wake (lib/wake.lua)
-- and, for the scripts that delete the lock or write records, lib/replay.lua's replayKey and
-- windowMs and their own request id `id` ('' for none).
-- Includes lib/hold.lua (extend, id_epoch), lib/replay.lua and lib/wake.lua. Provides epochKey,
-- rw_parse, rw_extend, rw_gone, rw_delete, timeout_key, is_writer, rw_drop, rw_live, rw_freed, rw_settle.
-- What edgelock keeps of the lock lives beside the hash, same hash slot, in one STRING that every
-- script reads together with its replay record (one MGET):
--   "edgelock_epoch:{<name>}"  the request id of the acquire that created this incarnation of
--            the hash (32 hex characters), with '+' appended once a waiter registered. Its TTL
--            is never shorter than any edgelock hold's lease (never shortened; set by the
--            acquire that creates the hash, deleted with the hash by our scripts).
-- The incarnation's epoch (what a stale lease or a late cancel checks) is read from that id
-- (lib/hold.lua id_epoch): creating the lock reads no clock. The id is also that acquire's replay
-- record: while the hash lives a copy of it finds its own id there and adds nothing; once the
-- hash is gone (expired, or its TTL shrunk to a shorter read hold's) the key lingers until the
-- creator's lease is over, and whatever deletes or replaces it earlier writes the creator a "G"
-- record (rw_gone). The '+' tells a release that someone may be registered for a wake-up: without
-- it the waiter registry is not read at all. A registration appends it (acquire.lua); a lock
-- created while registrations exist starts with it.
-- After a Redisson client deletes the hash the key lingers at most that lease, and counts only
-- while the hash exists (a key without either form, from an earlier version, holds a decimal
-- epoch; a lock made earlier still may keep 'e<epoch>' in the HASH: both still release).
-- @include lib/hold.lua
-- @include lib/replay.lua
-- @include lib/wake.lua

local epochKey = 'edgelock_epoch:' .. prefix

-- Reads the epoch key's value `v` (GET/MGET; nil: no key) and `old`, the HASH's 'edgelock:epoch'
-- field of an earlier version. Returns the epoch (a decimal string, '' when there is none: a lock
-- a Redisson client made), the creating request id (nil when unknown) and whether a waiter may
-- be registered (true whenever that is not known).
local function rw_parse(v, old)
  if not v then
    return old and string.sub(old, 2) or '', nil, true
  end
  local by, plus = string.match(v, '^(%x+)(%+?)$')
  if by and #by == 32 then
    return id_epoch(by), by, plus == '+'
  end
  return v, nil, true
end

-- extend (lib/hold.lua) for the hash and the epoch key: neither TTL is ever shortened (GT).
local function rw_extend(ms)
  extend(ms)
  redis.call('pexpire', epochKey, ms, 'gt')
end

-- The incarnation created by request `by` ends before that acquire's lease, and by other hands
-- than its own release: its record becomes "G" (unless it has one), so that a late copy of that
-- acquire finds it and takes nothing.
local function rw_gone(by)
  if by and by ~= id then
    redis.call('set', replayKey .. ':' .. by, 'G', 'px', windowMs, 'nx')
  end
end

-- Deletes the hash and its epoch key (and `more`, a key of the same slot, when given) of the
-- incarnation created by `by`.
local function rw_delete(by, more)
  if more then
    redis.call('del', name, epochKey, more)
  else
    redis.call('del', name, epochKey)
  end
  rw_gone(by)
end

local function timeout_key(owner, k)
  return prefix .. ':' .. owner .. ':rwlock_timeout:' .. k
end

local function is_writer(field)
  return string.sub(field, -6) == ':write'
end

-- Takes one hold of `field` away (needs the script's read, owner and field, defined before
-- this library): a read hold with its timeout key, the field with its last hold. Returns the
-- holds of `field` left.
local function rw_drop()
  local count = redis.call('hincrby', name, field, -1)
  if read then
    redis.call('del', timeout_key(owner, count + 1))
  end
  if count <= 0 then
    redis.call('hdel', name, field)
  end
  return count
end

-- Drops reader fields none of whose holds has a live timeout key (readers that died; Redisson
-- leaves them until the hash expires). Returns the longest remaining lease of a live read hold
-- in ms (0: none) and whether a writer field is left.
local function rw_live()
  local fields = redis.call('hgetall', name)
  local longest = 0
  local writer = false
  for i = 1, #fields, 2 do
    local field = fields[i]
    local count = tonumber(fields[i + 1])
    if count and is_writer(field) then
      writer = true
    elseif count then
      local alive = false
      for k = 1, count do
        local ttl = redis.call('pttl', timeout_key(field, k))
        if ttl > 0 then
          alive = true
          longest = math.max(longest, ttl)
        end
      end
      if not alive then
        redis.call('hdel', name, field)
      end
    end
  end
  return longest, writer
end

-- The lock held in `mode` is gone: Redisson's message on its channel, 1 = a writer left (wake
-- all: readers may all get in), 0 = the last reader left (wake one: only writers wait behind
-- readers), and our registered waiters likewise when `waiters` says some may be registered.
local function rw_freed(mode, waiters)
  if mode == 'write' then
    redis.call('publish', channel, 1)
    if waiters then
      wake_all()
    end
  else
    redis.call('publish', channel, 0)
    if waiters then
      wake_one()
    end
  end
end

-- After a hold was taken away from the incarnation `by` created: the lock stays write-held, goes
-- back to read mode (the writer also held reads: a downgrade, which lets waiting readers in),
-- keeps a TTL as long as its longest live read hold, or is freed. Every change that lets a waiter
-- in wakes it, when one may be registered (`waiters`, the epoch key's '+').
local function rw_settle(by, waiters)
  local mode = redis.call('hget', name, 'mode')
  if not mode then
    return
  end
  local longest, writer = rw_live()
  if writer then
    return
  end
  if longest > 0 then
    if mode == 'write' then
      redis.call('hset', name, 'mode', 'read')
      rw_extend(longest)
      if waiters then
        wake_all()
      end
    else
      -- Every live read hold has a key of its own, so the hash may shrink to the longest (the
      -- epoch key keeps its TTL: it still stands for the creating acquire).
      redis.call('pexpire', name, longest)
    end
    return
  end
  rw_delete(by)
  rw_freed(mode, waiters)
end
