-- The server's clock: Redis TIME, the one clock every script reads, so that every lease, slot,
-- registration and record of one name is measured on the same clock whatever the callers'
-- clocks say. Needs nothing defined first. Provides:
--   clock_ms()  server time in ms since 1970 (a number: exact, about 1.8e12)
--   clock_us()  server time in microseconds since 1970 as a decimal string (about 1.8e15: exact as a
--               double too, but Lua's own number formatting would round it; epochs and
--               fencing tokens are built from it)

local function clock_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function clock_us()
  local t = redis.call('time')
  return t[1] .. string.format('%06d', tonumber(t[2]))
end
