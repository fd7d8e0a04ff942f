-- Renew leases in one request: Redisson LockRenewalScheduler's batched renewal
-- (HEXISTS owner -> PEXPIRE). Naturally idempotent: a replay only re-applies the same TTL,
-- and never brings back a released lock because the owner field is gone.
-- KEYS[i]      lock name of lease i (HASH)
-- ARGV[2i-1]   leaseTime of lease i in ms
-- ARGV[2i]     owner field of lease i
-- Returns      array with one entry per lease: 1 renewed | 0 no longer held by that owner
local result = {}
for i = 1, #KEYS do
  local leaseMs = tonumber(ARGV[2 * i - 1])
  local owner = ARGV[2 * i]
  if redis.call('hexists', KEYS[i], owner) == 1 then
    redis.call('pexpire', KEYS[i], leaseMs)
    result[i] = 1
  else
    result[i] = 0
  end
end
return result
