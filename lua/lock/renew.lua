-- Renew leases in one request: Redisson LockRenewalScheduler's batched renewal
-- (HEXISTS owner -> PEXPIRE), except that a TTL is never shortened: a renewal with a shorter
-- lease than the lock has left changes nothing, so no other lease of the owner is cut short.
-- Naturally idempotent: a replay only re-applies the same TTL, and never brings back a released
-- lock because the owner field is gone.
-- KEYS[i]      lock name of lease i (HASH)
-- ARGV[2i-1]   leaseTime of lease i in ms
-- ARGV[2i]     owner field of lease i
-- Returns      array with one entry per lease: 1 held (TTL now at least its leaseTime)
--              | 0 no longer held by that owner
-- Billed       EVALSHA, then per lease held: HMGET, PEXPIRE (GT: never shortens), and HDEL
--              only where a hand-off is being confirmed
local result = {}
for i = 1, #KEYS do
  local leaseMs = tonumber(ARGV[2 * i - 1])
  local owner = ARGV[2 * i]
  local held = redis.call('hmget', KEYS[i], owner, 'edgelock:grant')
  if held[1] then
    redis.call('pexpire', KEYS[i], leaseMs, 'gt')
    -- A lock handed to this owner is now held for its lease: the hand-off is confirmed.
    if held[2] then
      redis.call('hdel', KEYS[i], 'edgelock:grant')
    end
    result[i] = 1
  else
    result[i] = 0
  end
end
return result
