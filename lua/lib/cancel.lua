-- Cancel-or-undo: the cancel of an acquire whose answer never reached the caller (aborted while
-- in flight, timed out, or the transport failed ambiguously). Whichever order the two requests
-- reach Redis in, the acquire takes effect at most momentarily: a cancel that arrives first
-- leaves a tombstone that turns the late acquire into a no-op; one that arrives after undoes
-- what the acquire did. Included by the cancel scripts, which define first what
-- lib/replay.lua needs (replayKey, windowMs). Includes lib/replay.lua. Provides:
--   cancel_or_undo(id, applied, undo)  for the acquire with request id `id`: no record yet,
--     records "C" and returns 0; a record matching the Lua pattern `applied` (an acquire that
--     applied; its first capture, or the whole record without one, is what `undo` gets),
--     calls undo(capture), records "U" and returns 1; any other record (already cancelled,
--     undone or released) returns 2 and changes nothing.
-- @include lib/replay.lua

local function cancel_or_undo(id, applied, undo)
  local seen = replay_get(id)
  if not seen then
    replay_set(id, 'C')
    return 0
  end
  local made = string.match(seen, applied)
  if not made then
    return 2
  end
  undo(made)
  replay_set(id, 'U')
  return 1
end
