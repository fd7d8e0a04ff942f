-- Read the state of one side of a read-write lock in one request (Redisson's isLocked,
-- isHeldByThread, getHoldCount, remainTimeToLive for RedissonReadLock / RedissonWriteLock).
-- Read-only.
-- KEYS[1]  lock name (HASH, see lib/rw.lua)
-- ARGV[1]  'read' | 'write'
-- ARGV[2]  field to count holds for: owner (read) or "<owner>:write" (write); '' = none
-- Returns  {locked 0|1, pttl in ms (-2 absent), hold count of ARGV[2]}. The read side is locked
--          in read mode, or in write mode when the writer also holds reads; the write side in
--          write mode.
-- Billed   EVALSHA, HGET, PTTL, plus HGET with an owner, HKEYS for the read side in write mode
local name = KEYS[1]
local mode = redis.call('hget', name, 'mode')
local locked = 0
if ARGV[1] == 'write' then
  locked = mode == 'write' and 1 or 0
elseif mode == 'read' then
  locked = 1
elseif mode == 'write' then
  for _, field in ipairs(redis.call('hkeys', name)) do
    if field ~= 'mode' and string.sub(field, -6) ~= ':write' then
      locked = 1
      break
    end
  end
end
local count = 0
if ARGV[2] ~= '' then
  count = tonumber(redis.call('hget', name, ARGV[2]) or '0') or 0
end
return {locked, redis.call('pttl', name), count}
