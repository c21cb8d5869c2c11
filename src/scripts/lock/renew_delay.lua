-- Renew a batch of watchdog-held locks that have a lock-delay (see
-- acquire.lua): each lock as renew.lua does, and its marker to the timeout +
-- the delay, so that it outlives the lock by the delay whenever the lock
-- expires unreleased.
--
-- KEYS[i]    per hold, two keys: the lock (hash), its marker dlock_lock_delay:{name}
-- ARGV[1]    the watchdog timeout in ms
-- ARGV[i+1]  per hold, two arguments: the owner id holding the lock, the delay in ms
--
-- Returns one integer per hold: 1 renewed, 0 no longer held by that owner.
-- With client tracking on, no KEYS: ARGV[2] = the number of keys, ARGV[3..]
-- the keys, then the per-hold arguments (include/renew_keys.lua).
--@include delay.lua
--@include renew_keys.lua
return renewed(2, function(i)
  local lock, marker = keys[2 * i - 1], keys[2 * i]
  local owner, delay = ARGV[a + 2 * i - 1], tonumber(ARGV[a + 2 * i])
  if redis.pcall('hexists', lock, owner) ~= 1 then
    return false
  end
  redis.call('pexpire', lock, ARGV[1])
  -- A string holding the owner id (written again if gone); never
  -- someone's data of another type.
  if not delay_wrongtype(marker) then
    delay_write(marker, owner, ARGV[1], delay)
  end
  return true
end)
