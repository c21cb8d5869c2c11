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
-- With client tracking on (lock/renew.lua) the watchdog
-- passes no KEYS: ARGV[2] = the number of keys, ARGV[3..] the keys, and the
-- per-hold arguments follow them. Redis 7.0 remembers, for every read-only
-- command a script runs, all the keys the script declared: a batch of 100
-- declared keys would cost 100 x 100 tracking-table inserts. The watchdog
-- sends EXISTS of the keys right after instead (one insert each).
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local until_ms = now + tonumber(ARGV[1])
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
