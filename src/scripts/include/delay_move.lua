-- Fragment (--@include, see cmake/embed_scripts.cmake) of the hand-over
-- scripts (lock/transfer.lua, lock/adopt.lua): the
-- lock-delay marker follows a hold whose TTL changes from `old` ms (the
-- lock's PTTL before; -1: none) to `new` ms, and names `to` as its holder.
-- Only a marker holding `owner` (the hold's owner so far) is touched; it
-- keeps the margin it had past the lock (the delay), and never shortens.
local function delay_move(marker, owner, to, old, new)
  if not marker or redis.call('type', marker).ok ~= 'string' or
     redis.call('get', marker) ~= owner then
    return
  end
  local left = redis.call('pttl', marker)
  local px = left
  if old >= 0 and new >= 0 then
    px = math.max(left, new + math.max(left - old, 0))
  end
  if px > 0 then
    redis.call('set', marker, to, 'px', px)
  else
    redis.call('set', marker, to)
  end
end
