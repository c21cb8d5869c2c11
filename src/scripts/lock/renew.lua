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
-- With client tracking on (the watchdog's revocation listener) the watchdog
-- passes no KEYS: ARGV[2] = the number of keys, ARGV[3..] the keys, and the
-- per-hold arguments follow them. Redis 7.0 remembers, for every read-only
-- command a script runs, all the keys the script declared: a batch of 100
-- declared keys would cost 100 x 100 tracking-table inserts. The watchdog
-- sends EXISTS of the keys right after instead (one insert each).
local keys, a = KEYS, 1
if #KEYS == 0 then
  local n = tonumber(ARGV[2])
  keys = {}
  for i = 1, n do
    keys[i] = ARGV[2 + i]
  end
  a = 2 + n
end
local out = {}
for i, lock in ipairs(keys) do
  local held = 0
  if redis.pcall('hexists', lock, ARGV[a + i]) == 1 then
    redis.call('pexpire', lock, ARGV[1])
    held = 1
  end
  out[i] = held
end
return out
