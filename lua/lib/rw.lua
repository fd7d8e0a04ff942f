-- Helpers for a read-write lock (Redisson RedissonReadWriteLock's layout). Included by scripts,
-- which define first:
--   name     the lock name (KEYS): HASH with field 'mode' = 'read' | 'write', reader fields
--            <owner> = read hold count, writer fields <owner>:write = write hold count, and
--            nothing else: Redisson's scripts count the fields (a read lock is locked in write
--            mode when HLEN > 2; the last write unlock deletes the hash when HLEN == 1)
--   prefix   "{<name>}" (KEYS): each read hold k of an owner has its own timeout key
--            "{<name>}:<owner>:rwlock_timeout:<k>" (STRING with PX = that hold's lease), so a
--            crashed reader's holds expire on their own
--   channel  Redisson's "redisson_rwlock:{<name>}" (KEYS), and waiting / wake (lib/wake.lua)
-- and the keys of lib/wake.lua (waiting, wake). Includes lib/hold.lua (extend) and lib/wake.lua
-- (wake_all, wake_one). The incarnation of the lock (the epoch a stale lease or a late cancel
-- checks) lives beside the hash, same hash slot:
--   "edgelock_epoch:{<name>}" STRING, decimal; set by the acquire that creates the hash, with a
--   TTL never shorter than any edgelock hold's lease, deleted with the hash by our scripts.
-- After a Redisson client deletes the hash it lingers at most that lease, and counts only while
-- the hash exists. Provides rw_epoch, rw_new_epoch, rw_extend, rw_delete, timeout_key,
-- is_writer, rw_drop, rw_live, rw_settle.
-- @include lib/hold.lua
-- @include lib/wake.lua

local epochKey = 'edgelock_epoch:' .. prefix

local function rw_epoch()
  if redis.call('exists', name) == 0 then
    return ''
  end
  local e = redis.call('get', epochKey)
  if e then
    return e
  end
  -- A lock made by an earlier version kept 'e<epoch>' in the HASH: its leases still release.
  local old = redis.call('hget', name, 'edgelock:epoch')
  return old and string.sub(old, 2) or ''
end

local function rw_new_epoch()
  local e = clock_us()
  redis.call('set', epochKey, e)
  return e
end

-- extend (lib/hold.lua) for the hash and the epoch: neither TTL is ever shortened.
local function rw_extend(ms)
  extend(ms)
  if redis.call('pttl', epochKey) < ms then
    redis.call('pexpire', epochKey, ms)
  end
end

-- Deletes the hash and its epoch.
local function rw_delete()
  redis.call('del', name, epochKey)
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

-- After a hold was taken away: the lock stays write-held, goes back to read mode (the writer
-- also held reads: a downgrade, which lets waiting readers in), keeps a TTL as long as its
-- longest live read hold, or is freed. Every change that lets a waiter in wakes it.
local function rw_settle()
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
      wake_all()
    else
      -- Every live read hold has a key of its own, so the hash may shrink to the longest.
      redis.call('pexpire', name, longest)
    end
    return
  end
  rw_delete()
  -- Redisson's messages: 1 = a writer left (wake all: readers may all get in), 0 = the last
  -- reader left (wake one: only writers wait behind readers).
  if mode == 'write' then
    redis.call('publish', channel, 1)
    wake_all()
  else
    redis.call('publish', channel, 0)
    wake_one()
  end
end
