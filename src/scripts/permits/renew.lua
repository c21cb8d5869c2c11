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
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local until_ms = now + tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS / 2 do
  local leases, id = KEYS[2 * i], ARGV[i + 1]
  local held = 0
  local s = redis.pcall('zscore', leases, id)
  if type(s) == 'string' and tonumber(s) > now then
    redis.call('zadd', leases, 'xx', until_ms, id)
    held = 1
  end
  out[i] = held
end
return out
