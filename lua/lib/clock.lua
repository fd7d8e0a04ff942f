-- The server's clock: Redis TIME, the one clock every script reads, so that every lease, slot,
-- registration and record of one name is measured on the same clock whatever the callers'
-- clocks say. A script reads it once (TIME is a billed call): every later reading in the same
-- script answers the first, which is what an atomic script sees anyway. Needs nothing defined
-- first. Provides:
--   clock_ms()  server time in ms since 1970 (a number: exact, about 1.8e12)
--   clock_us()  server time in microseconds since 1970 as a decimal string (about 1.8e15: exact as a
--               double too, but Lua's own number formatting would round it; epochs and
--               fencing tokens are built from it)
local clock_now

local function clock_time()
  if not clock_now then
    clock_now = redis.call('time')
  end
  return clock_now
end

local function clock_ms()
  local t = clock_time()
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function clock_us()
  local t = clock_time()
  return t[1] .. string.format('%06d', tonumber(t[2]))
end
