-- A waiting call gives up, is aborted, or fails: unregister it, so no release wakes it and
-- nothing of it stays in Redis, and pass on a wake-up it may have missed (lib/wake.lua,
-- waiting_leave). For every kind whose waiters are only woken (the reentrant lock's own
-- waiters, which may be handed the lock, use decline.lua).
-- KEYS[1]  registered waiters "edgelock_waiting:{<name>}" (ZSET)
-- KEYS[2]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- ARGV[1]  waiter id of the call
-- Returns  1 unregistered | 0 it was not registered (the next live waiter woken, if any)
local waiting, wake = unpack(KEYS)
-- @include lib/wake.lua

return waiting_leave(ARGV[1]) and 1 or 0
