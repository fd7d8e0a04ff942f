-- Renew a read lease: Redisson's ReadLockTask (the owner's read-hold timeout keys and the
-- hash), never shortening a TTL. A write lease renews with lua/lock/renew.lua on the writer's
-- field "<owner>:write". Naturally idempotent.
-- KEYS[1]  lock name (HASH, see lib/rw.lua)
-- KEYS[2]  timeout key prefix "{<name>}"
-- ARGV[1]  leaseTime in ms
-- ARGV[2]  owner
-- Returns  {1} held (every read hold of the owner now has at least leaseTime) | {0} not held
local name = KEYS[1]
local prefix = KEYS[2]
local leaseMs = tonumber(ARGV[1])
local owner = ARGV[2]
local count = tonumber(redis.call('hget', name, owner) or '0')
if count <= 0 then
  return {0}
end
local live = false
for k = 1, count do
  local key = prefix .. ':' .. owner .. ':rwlock_timeout:' .. k
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
if redis.call('pttl', name) < leaseMs then
  redis.call('pexpire', name, leaseMs)
end
return {1}
