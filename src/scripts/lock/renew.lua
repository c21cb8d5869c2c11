-- Renew a batch of watchdog-held locks in one call (all keys in one slot).
--
-- KEYS[i]    a lock (hash)
-- ARGV[1]    the watchdog timeout in ms
-- ARGV[i+1]  the owner id holding KEYS[i]
--
-- Returns one integer per key: 1 renewed, 0 no longer held by that owner (the
-- client reports it lost). A key replaced by another type counts as lost for
-- its own entry (pcall catches the WRONGTYPE) rather than failing the batch.
--
-- With client tracking on, no KEYS: ARGV[2] = the number of keys, ARGV[3..]
-- the keys, then the per-hold arguments (include/renew_keys.lua says why).
--@include renew_keys.lua
return renewed(1, function(i)
  if redis.pcall('hexists', keys[i], ARGV[a + i]) ~= 1 then
    return false
  end
  redis.call('pexpire', keys[i], ARGV[1])
  return true
end)
