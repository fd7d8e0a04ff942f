-- Renew a lease on a read-write lock, never shortening a TTL. A read lease: Redisson's
-- ReadLockTask (the owner's read-hold timeout keys and the hash). A write lease (field
-- "<owner>:write"): Redisson's LockTask on the writer's field (HEXISTS -> PEXPIRE). Either also
-- keeps the lock's epoch (lib/rw.lua) at least as long. Naturally idempotent.
-- KEYS[1]  lock name (HASH, see lib/rw.lua)
-- KEYS[2]  timeout key prefix "{<name>}" (and the epoch "edgelock_epoch:{<name>}")
-- ARGV[1]  leaseTime in ms
-- ARGV[2]  owner (read lease) or "<owner>:write" (write lease)
-- Returns  {1} held (every hold of that lease's side now has at least leaseTime) | {0} not held
-- Billed   write lease: EVALSHA, HGET, PEXPIRE GT (hash), PEXPIRE GT (epoch key) (4); a read
--          lease adds a PTTL per read hold of the owner, and a PEXPIRE where one is shorter
local name, prefix = unpack(KEYS)
local leaseMs = tonumber(ARGV[1])
local owner = ARGV[2]
local channel = ''
-- @include lib/hold.lua
-- @include lib/rw.lua

local count = tonumber(redis.call('hget', name, owner) or '0') or 0
if count <= 0 then
  return {0}
end
if not is_writer(owner) then
  local live = false
  for k = 1, count do
    local key = timeout_key(owner, k)
    local ttl = redis.call('pttl', key)
    if ttl > 0 then
      live = true
      if ttl < leaseMs then
        redis.call('pexpire', key, leaseMs)
      end
    end
  end
  -- A reader whose every hold has lapsed has lost its lease, even if the hash is still there.
  if not live then
    return {0}
  end
end
rw_extend(leaseMs)
return {1}
