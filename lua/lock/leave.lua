-- A waiting call of a reentrant lock gives up or is aborted: unregister it, so no release wakes
-- it and nothing of it stays in Redis (see lib/wake.lua).
-- KEYS[1]  registered waiters "edgelock_waiting:{<name>}" (ZSET)
-- KEYS[2]  wake channels "edgelock_wake:{<name>}" (prefix, lib/wake.lua)
-- ARGV[1]  waiter id of the call
-- Returns  1
local waiting, wake = unpack(KEYS)
-- @include lib/wake.lua

waiting_remove(ARGV[1])
return 1
