-- Who holds a lock, read in one request (lock.inspect(), `edgelock inspect`). Read-only.
-- KEYS[1]  lock name (HASH: field = owner, value = hold count)
-- KEYS[2]  optional: a fenced lock's token "redisson_lock_token:{<name>}"
-- ARGV[1]  most holders to return (integer >= 1): a lock has one, the bound only matters for a
--          key that is not a lock
-- Returns  {pttl in ms (-2 absent, -1 no TTL), owner_1, count_1, owner_2, count_2, ...}
--          With KEYS[2], the last token issued (0: none) comes second: {pttl, token, owner_1, ...}
--          Each owner is prefixed with '=' so that no client JSON-decodes it (@upstash/redis
--          turns a reply string "123" into a number); fields whose value is not a hold count
--          (a non-negative integer) and our own fields ('edgelock:epoch', 'edgelock:grant', ...: see
--          lua/lib/hold.lua, lua/lib/fair.lua) are left out. A key that is not a HASH fails with WRONGTYPE,
--          as every lock script does.
local name = KEYS[1]
-- lib/hold.lua's fields.
local OURS = {
  ['edgelock:epoch'] = true,
  ['edgelock:grant'] = true,
  ['edgelock:by'] = true,
  ['edgelock:partial'] = true,
  ['edgelock:token'] = true,
  ['edgelock:waiters'] = true,
}
local limit = tonumber(ARGV[1])
local result = {redis.call('pttl', name)}
if KEYS[2] then
  result[2] = tonumber(redis.call('get', KEYS[2]) or '0')
end
local fields
if redis.call('hlen', name) <= limit then
  fields = redis.call('hgetall', name)
else
  fields = redis.call('hscan', name, 0, 'COUNT', limit)[2]
end
local found = 0
for i = 1, #fields, 2 do
  if found >= limit then
    break
  end
  local count = fields[i + 1]
  local field = fields[i]
  if not OURS[field] and string.match(count, '^%d+$') then
    result[#result + 1] = '=' .. field
    result[#result + 1] = tonumber(count)
    found = found + 1
  end
end
return result
