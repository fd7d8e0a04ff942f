-- Permits with leases (Redisson RPermitExpirableSemaphore layout). Included by scripts, which
-- define first:
--   name      semaphore name: STRING, available permits (KEYS)
--   timeouts  "{<name>}:timeout": ZSET permit id (16 raw bytes) -> expiry, epoch ms (KEYS)
--   channel   Redisson channel "redisson_sc:{<name>}" (KEYS)
--   held      "edgelock_held:{<name>}": ZSET permit id (16 bytes) -> expiry ms, the permits
--             edgelock callers took (KEYS); a live permit in `timeouts` that is not here a
--             Redisson client took, and its release wakes only Redisson's channel
-- and the keys of lib/wake.lua, which this includes (wake_n, and the clock with it). Permit ids
-- travel as 32 hex characters and are stored as the 16 bytes they encode, as Redisson stores
-- them, so JVM clients see the same permits. Provides NON_EXPIRABLE, permit_bytes, permit_hex,
-- held_set, held_foreign, reclaim, give_back.
-- @include lib/wake.lua

-- Redisson's score for a permit without a lease (about the year 31197): never expires.
local NON_EXPIRABLE = 922337203685477

local function permit_bytes(hex)
  return (string.gsub(hex, '..', function(cc)
    return string.char(tonumber(cc, 16))
  end))
end

local function permit_hex(bytes)
  return (string.gsub(bytes, '.', function(c)
    return string.format('%02x', string.byte(c))
  end))
end

-- Records permit `member` as taken by an edgelock caller until `expiry`. The record lives as
-- long as its last permit's lease, so one a Redisson client emptied (its delete) goes too.
local function held_set(member, expiry, now)
  redis.call('zadd', held, expiry, member)
  if redis.call('pttl', held) < expiry - now then
    redis.call('pexpire', held, expiry - now)
  end
end

-- Whether a live permit is held by someone other than an edgelock caller (a Redisson client).
local function held_foreign(now)
  local bound = '(' .. now
  return redis.call('zcount', timeouts, bound, '+inf') > redis.call('zcount', held, bound, '+inf')
end

-- Returns every permit whose lease ran out by `now` to the pool and wakes waiters it can serve.
-- Returns the available permits after.
local function reclaim(now)
  redis.call('zremrangebyscore', held, 0, now)
  local expired = redis.call('zcount', timeouts, 0, now)
  if expired > 0 then
    redis.call('zremrangebyscore', timeouts, 0, now)
    local available = redis.call('incrby', name, expired)
    redis.call('publish', channel, available)
    wake_n(available)
    return available
  end
  return tonumber(redis.call('get', name)) or 0
end

-- Gives the listed permits (ARGV from `first`) back to the pool if still held. Returns how many.
local function give_back(first)
  local removed = 0
  for i = first, #ARGV do
    local member = permit_bytes(ARGV[i])
    removed = removed + redis.call('zrem', timeouts, member)
    redis.call('zrem', held, member)
  end
  if removed > 0 then
    local available = redis.call('incrby', name, removed)
    redis.call('publish', channel, available)
    wake_n(available)
  end
  return removed
end
