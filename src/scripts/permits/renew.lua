-- Renew a batch of watchdog permits in one call (all keys in one slot): each
-- lease is set to now + the watchdog timeout.
--
-- KEYS[i]    pairs, one per permit: the semaphore, then its leases key
--            ({name}:timeout, see acquire.lua)
-- ARGV[1]    the watchdog timeout in ms
-- ARGV[i+1]  the id (16 bytes) of the permit of pair i
--
-- Returns one integer per permit: 1 renewed, 0 gone (released, or its lease
-- ran out: it is back in the pool, or about to be; the client reports it
-- lost). A leases key replaced by another type counts as gone for its own
-- permit (pcall) rather than failing the batch.
--
-- With client tracking on, no KEYS: ARGV[2] = the number of keys, ARGV[3..]
-- the keys, then the per-hold arguments (include/renew_keys.lua says why).
--@include now.lua
local until_ms = now + tonumber(ARGV[1])
--@include renew_keys.lua
for i = 1, #keys / 2 do
  local leases, id = keys[2 * i], ARGV[a + i]
  local held = 0
  local s = redis.pcall('zscore', leases, id)
  if type(s) == 'string' and tonumber(s) > now then
    redis.call('zadd', leases, 'xx', until_ms, id)
    held = 1
  end
  out[i] = held
end
return out
