-- The last fencing token issued on a fenced lock: Redisson RedissonFencedLock#getToken (GET of
-- the token key; a missing key is 0). Read-only.
-- KEYS[1]  token "redisson_lock_token:{<name>}"
-- Returns  the token (integer), 0 when none was issued (or Redis lost the key)
return tonumber(redis.call('get', KEYS[1]) or '0')
