-- Delete a semaphore: its permits, the permits set and the count of permits edgelock callers
-- took (Redisson RObject#delete on the name). Redisson's own delete leaves the last two, so
-- after it holders can still give back what they took, as Redisson's semantics allow.
-- Waiters keep waiting (a missing semaphore has 0 permits) until a new one is set.
-- KEYS[1]  semaphore name (STRING, available permits)
-- KEYS[2]  permits set "edgelock_permits:{<name>}" (STRING)
-- KEYS[3]  permits taken by edgelock callers "edgelock_taken:{<name>}" (STRING)
-- Returns  1 if the semaphore existed, else 0
local existed = redis.call('exists', KEYS[1])
redis.call('del', KEYS[1], KEYS[2], KEYS[3])
return existed
