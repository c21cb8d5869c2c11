-- Fragment (--@include, see cmake/embed_scripts.cmake) of the hand-over
-- scripts (lock/transfer.lua, lock/adopt.lua): the
-- lock-delay marker follows a hold whose TTL changes from `old` ms (the
-- lock's PTTL before; -1: none) to `new` ms, and names `to` as its holder.
-- Only a live marker holding `owner` (the hold's owner so far) is touched
-- (include/delay.lua's helpers, included before this); it
-- keeps the margin it had past the lock (the delay), and never shortens.
local function delay_move(marker, owner, to, old, new)
  local who, left = delay_read(marker)
  if who ~= owner then
    return
  end
  local ms = left
  if old >= 0 and new >= 0 then
    ms = math.max(left, new + math.max(left - old, 0))
  end
  delay_put(marker, to, ms)
end
