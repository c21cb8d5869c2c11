-- Renew a batch of watchdog permits in one call (all keys in one slot): each
-- lease is set to now + the watchdog timeout.
--
-- KEYS[i]    pairs, one per permit: the semaphore, then its leases key
--            ({name}:timeout, see acquire.lua)
-- ARGV[1]    the watchdog timeout in ms
-- ARGV[i+1]  the id (16 bytes) of the permit of pair i
-- With a lock-delay, each permit has three keys, the semaphore, its leases
-- key and the set dlock_permit_delay:{name}, and two arguments, the id and
-- the delay in ms: its entry in the set is renewed to the timeout + the
-- delay (include/delay.lua). A batch is of one form: three keys for two
-- arguments per permit, or two for one (the counts tell which).
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
--@include delay.lua
local nk, na = 2, 1
if #keys > 0 and #keys ~= 2 * (#ARGV - a) then
  nk, na = 3, 2
end
return renewed(nk, function(i)
  local leases, id = keys[nk * (i - 1) + 2], ARGV[a + na * (i - 1) + 1]
  local s = redis.pcall('zscore', leases, id)
  if type(s) ~= 'string' or tonumber(s) <= now then
    return false
  end
  redis.call('zadd', leases, 'xx', until_ms, id)
  if nk == 3 and not delay_wrongtype(keys[nk * i], 'zset') then
    rdelay_write(keys[nk * i], id, ARGV[1], tonumber(ARGV[a + na * i]))
  end
  return true
end)
