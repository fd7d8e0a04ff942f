-- Delete a semaphore: its permits and the permits set (Redisson RObject#delete on the name).
-- Waiters keep waiting (a missing semaphore has 0 permits) until a new one is set.
-- KEYS[1]  semaphore name (STRING, available permits)
-- KEYS[2]  permits set "edgelock_permits:{<name>}" (STRING)
-- Returns  1 if the semaphore existed, else 0
local existed = redis.call('exists', KEYS[1])
redis.call('del', KEYS[1], KEYS[2])
return existed
