-- The names of our fields in a lock HASH (lib/hold.lua says what each one holds) and the epoch a
-- request id names. Needs nothing defined first and includes nothing, so that a script's common
-- path can use them before the rest of the script is defined (lib/reentrant-free.lua,
-- lib/release-free.lua). Provides EPOCH, GRANT, BY, PARTIAL, TOKEN, WAITERS, id_epoch(id).
-- lua/lock/acquire.lua and release.lua spell EPOCH, BY, PARTIAL and WAITERS out in the common
-- paths they run before anything is defined (test/lua.test.ts checks that they match).
local EPOCH = 'edgelock:epoch'
local GRANT = 'edgelock:grant'
local BY = 'edgelock:by'
local PARTIAL = 'edgelock:partial'
local TOKEN = 'edgelock:token'
local WAITERS = 'edgelock:waiters'

-- The epoch of an incarnation created by the request `id` (32 hex characters, random): its
-- first 13 hex digits plus 1, a safe integer in [1, 2^52] read from no clock, so creating a lock
-- costs no TIME call. As a decimal string.
local function id_epoch(id)
  return string.format('%.0f', tonumber(string.sub(id, 1, 13), 16) + 1)
end
