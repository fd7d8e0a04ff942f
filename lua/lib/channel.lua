-- The clients' wake channels, which the REST API serves as /subscribe/<channel>: the channel is
-- part of a URL path there, so it may hold only what every path carries to Redis unchanged.
-- Waiter "<client>:<wait>" of `name` listens on "edgelock_wake:{<name>}:<client>", or, when the
-- name holds a control character or one of / ? # % \ , (a path would end, be cut or be decoded
-- there, and `@upstash/redis` splits its SSE lines at commas), on
-- "edgelock_wake:<SHA1 hex of the name>:<client>". src/wait/wakes.ts builds the same names.
-- redis.sha1hex is not a call to Redis: it is not billed. Needs nothing defined first.
-- Provides wake_channel_of.

local function wake_channel_of(name, waiter)
  local client = string.match(waiter, '^([^:]*):') or waiter
  if string.find(name, '[%c/?#%%\\,]') then
    return 'edgelock_wake:' .. redis.sha1hex(name) .. ':' .. client
  end
  return 'edgelock_wake:{' .. name .. '}:' .. client
end
