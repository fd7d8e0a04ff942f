-- The arguments every release of a lock HASH takes first, ARGV[1..5] of lua/lock/release.lua
-- and lua/fair-lock/release.lua (their headers say what each is; HashHolds#releaseArgs sends
-- them), bound to the names lib/release.lua and lib/replay.lua use. Needs nothing defined first;
-- included before those. Provides owner, leaseMs (a number), windowMs (a number), id, held.
local owner = ARGV[1]
local leaseMs = tonumber(ARGV[2])
local windowMs = tonumber(ARGV[3])
local id = ARGV[4]
local held = ARGV[5]
