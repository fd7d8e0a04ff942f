-- Delete a permit-expirable semaphore: its permits, their leases, the permits set and the record
-- of the permits edgelock callers took (Redisson RObject#delete covers both of its keys).
-- Waiters keep waiting until it is set again.
-- KEYS[1]  semaphore name (STRING, available permits)
-- KEYS[2]  permit leases "{<name>}:timeout" (ZSET)
-- KEYS[3]  permits set "edgelock_permits:{<name>}" (STRING)
-- KEYS[4]  permits edgelock callers took "edgelock_held:{<name>}" (ZSET, lib/permits.lua)
-- Returns  1 if the semaphore existed, else 0
local existed = redis.call('exists', KEYS[1])
redis.call('del', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
return existed
