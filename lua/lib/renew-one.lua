-- One lease's renewal (lua/lock/renew.lua's, for a single lease), for the scripts that also tell
-- the waiter then first when it confirms a hand-off (lua/lock/confirm.lua,
-- lua/fair-lock/confirm.lua). Needs `name` (KEYS) defined first.
-- Provides renew_one(owner, leaseMs): nil when `owner` no longer holds the lock, false when
-- renewed, true when renewed and that confirmed a hand-off (the GRANT field is gone).
-- Billed   HMGET, PEXPIRE (GT) (+ HDEL confirming a hand-off)
local function renew_one(owner, leaseMs)
  local held = redis.call('hmget', name, owner, 'edgelock:grant')
  if not held[1] then
    return nil
  end
  redis.call('pexpire', name, leaseMs, 'gt')
  if not held[2] then
    return false
  end
  redis.call('hdel', name, 'edgelock:grant')
  return true
end
