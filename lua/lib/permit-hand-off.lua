-- Hand-offs of freed permits to registered semaphore waiters: the semaphores' counterpart of
-- lib/wake.lua's hand_off_one. A waiter whose client hears its wake channel registers asking for
-- a hand-off with the request id of its busy attempt ("<permits>|<request id>", lib/wake.lua's
-- grants); a release then gives it its permits, first registered first, and sends it
-- "<waiter>|<request id>" (plus what the kind adds): the waiter holds them on that message,
-- with no request of its own, as if that busy attempt had taken them. Included by scripts,
-- which define first what lib/wake.lua needs (waiting, wake) and lib/replay.lua's replayKey
-- and windowMs. Includes lib/wake.lua.
-- Provides permit_grant, handed_key, handed_parse, handed_take, hand_off_permits and
-- handed_as_acquired.
-- What makes a hand-off safe:
--   - a waiter that cannot hear (PUBLISH reached nobody: its client is gone or its stream is
--     closed) is given nothing: the permits go to the next waiter or stay in the pool. (The
--     bridge subscribes where a channel's PUBLISH is counted, its slot's node, also on a
--     cluster.)
--   - handed_key(waiter) names what it was handed ("<request id>|<permits>"), for the window
--     the kind gives it: a waiting call that ends without taking it (it gave up, was aborted,
--     or its answer came too late) gives it back with the request that unregisters it, and a
--     later attempt of the same call takes it over instead of taking more.
--   - the kind records the hand-off as the busy attempt's acquire (its replay record, or its
--     permits), so a late copy of that attempt finds the permits it was given, and a cancel
--     or a release of that request id finds them too.
-- @include lib/wake.lua

-- The grant a busy attempt of `id` for `permits` permits asks for (waiting_add's `grant`);
-- `rest` (optional) is passed on to the kind's give and sent with the message.
local function permit_grant(permits, id, rest)
  return permits .. '|' .. id .. (rest or '')
end

-- The STRING that names what waiter `waiter` was handed: "<request id>|<permits>". A record of
-- lib/replay.lua's kind (the same prefix, replayKey, and the same one-window life): nothing
-- deletes it when the waiter holds the permits on the message, and it needs none.
local function handed_key(waiter)
  return replayKey .. ':handed:' .. waiter
end

-- What a handed_key record says: the request id the permits were handed as and how many
-- ('' and 0 for a record of another form).
local function handed_parse(handed)
  local from, n = string.match(handed, '^(%x+)|(%d+)$')
  return from or '', tonumber(n) or 0
end

-- Takes what waiter `waiter` was handed off its record (GET, then DEL when there is one):
-- handed_parse's answer, or nil when nothing was handed.
local function handed_take(waiter)
  local key = handed_key(waiter)
  local handed = redis.call('get', key)
  if not handed then
    return nil
  end
  redis.call('del', key)
  return handed_parse(handed)
end

-- Hands the `available` permits just freed to live registered waiters in registration order.
-- A waiter that asked for a hand-off of no more permits than are left is sent
-- "<waiter>|<request id><rest>" (rest: what the kind's grant adds after the id, e.g. "|<lease
-- ms>") and, when that reached a subscriber, give(waiter, permits, id, rest) makes them that
-- request's and handed_key(waiter) names them for windowMs.
-- A waiter that asked for none, or for more than are left, is only woken (counted as one
-- permit, as wake_n counts it: it attempts and registers again); so is one whose give answers
-- false (the kind refuses: e.g. the attempt was cancelled). Every waiter tried is
-- unregistered. Returns the permits handed over: the caller takes them from the pool.
-- Billed   per waiter tried: waiting_head's ZRANGE, waiting_pop's HGET, HDEL, ZREM (+ DEL
--          for the last), then PUBLISH, SET, plus give's calls; once: TIME (+ what lapsed
--          registrations cost, lib/wake.lua waiting_head)
local function hand_off_permits(available, give)
  if available <= 0 then
    return 0
  end
  local handed, woken = 0, 0
  while handed + woken < available do
    local head, last = waiting_head()
    if not head then
      break
    end
    local grant = waiting_pop(head, last)
    local n, id, rest
    if grant then
      n, id, rest = string.match(grant, '^(%d+)|(%x+)(.*)$')
      n = tonumber(n)
    end
    if n and n <= available - handed - woken then
      -- Atomic with what follows: the message leaves only once the script has given them. A
      -- give that refuses (the attempt was cancelled) leaves the message a plain wake-up.
      if redis.call('publish', wake_channel(head), head .. '|' .. id .. rest) > 0 then
        if give(head, n, id, rest) == false then
          woken = woken + 1
        else
          redis.call('set', handed_key(head), id .. '|' .. n, 'px', windowMs)
          handed = handed + n
        end
      end
    elseif redis.call('publish', wake_channel(head), head) > 0 then
      woken = woken + 1
    end
  end
  return handed
end

-- The plain semaphore's give (hand_off_permits): the permits become what the busy attempt `id`
-- took, its replay record "A<permits>" (lua/semaphore/acquire.lua's), so a late copy of that
-- attempt takes nothing more, the waiter's permit handle releases them under that id, and a
-- cancel of it gives them back. Refused (false) when the attempt has a record already: its
-- cancel's tombstone. A late copy of a cancelled attempt can register its waiter after the
-- call ended; permits handed to it then would be nobody's, for good (no later attempt takes
-- them over, no leave gives them back, the cancel has run). Needs replayKey and windowMs
-- (lib/replay.lua's names).
local function handed_as_acquired(_, permits, id)
  return redis.call('set', replayKey .. ':' .. id, 'A' .. permits, 'px', windowMs, 'nx') ~= false
end
