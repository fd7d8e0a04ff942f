-- The KEYS and ARGV that lua/lock/acquire.lua and lua/fenced-lock/acquire.lua share (their
-- headers say what each is: KEYS[1..5], ARGV[1..6] and ARGV[8]), bound to the names
-- lib/replay.lua, lib/wake.lua and lib/reentrant.lua use. Needs nothing defined first; included
-- by lib/reentrant.lua before everything else. Provides name, replayKey, waiting, wake, leaseMs
-- (a number), owner, windowMs (a number), id, waiter, waitMs (as sent: '' or absent without a
-- waiter), registered (true when the waiter may be registered by an earlier attempt).
local name, replayKey, _, waiting, wake = unpack(KEYS)
local leaseMs = tonumber(ARGV[1])
local owner = ARGV[2]
local windowMs = tonumber(ARGV[3])
local id = ARGV[4]
local waiter = ARGV[5]
local waitMs = ARGV[6]
local registered = ARGV[8] ~= '0'
