-- Delete a semaphore: its permits, the permits set and the count of permits edgelock callers
-- took (Redisson RObject#delete on the name). Redisson's own delete leaves the last two, so
-- after it holders can still give back what they took, as Redisson's semantics allow.
-- Registered waiters are woken: their next attempt finds no permits set, so they wait on
-- Redisson's channel, where the next trySetPermits publishes (the count, which also marks that
-- waiters are registered, goes with the semaphore: lib/taken.lua).
-- KEYS[1]  semaphore name (STRING, available permits)
-- KEYS[2]  permits set "edgelock_permits:{<name>}" (STRING)
-- KEYS[3]  permits taken by edgelock callers and the waiter mark "edgelock_taken:{<name>}"
--          (STRING)
-- KEYS[4]  registered waiters "edgelock_waiting:{<name>}" (ZSET, see lib/wake.lua)
-- KEYS[5]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- Returns  1 if the semaphore existed, else 0
-- Billed   nobody waiting: EVALSHA, EXISTS, DEL, ZRANGE: 4
local name, limitKey, takenKey, waiting, wake = unpack(KEYS)
-- @include lib/wake.lua

local existed = redis.call('exists', name)
redis.call('del', name, limitKey, takenKey)
wake_all()
return existed
