-- Renew a batch of watchdog-held locks in one call (all keys in one slot).
--
-- KEYS[i]    a lock (hash)
-- ARGV[1]    the watchdog timeout in ms
-- ARGV[i+1]  the owner id holding KEYS[i]
--
-- Returns one integer per key: 1 renewed, 0 no longer held by that owner (the
-- client reports it lost). A key replaced by another type counts as lost for
-- its own entry (pcall catches the WRONGTYPE) rather than failing the batch.
local out = {}
for i, lock in ipairs(KEYS) do
  local held = 0
  if redis.pcall('hexists', lock, ARGV[i + 1]) == 1 then
    redis.call('pexpire', lock, ARGV[1])
    held = 1
  end
  out[i] = held
end
return out
