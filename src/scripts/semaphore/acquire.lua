-- Take n permits of a semaphore (Redisson's RSemaphore) when that many are
-- available. Never waits: the caller sleeps on the channel until a message
-- says permits came back.
--
-- KEYS[1]  the semaphore: a string holding the available permits
-- KEYS[2]  (optional) the failover quarantine's record (dlock's own:
--          include/quarantine.lua): honoured whenever given
-- ARGV[1]  n, the permits asked (1..2^31-1, checked by the caller)
--
-- Returns nil when taken, else the available count (0 when the key does not
-- exist; negative after permits were taken away). A key of another type
-- raises WRONGTYPE at GET, and a string that is not a count answers a
-- WRONGTYPE error, both before anything is written.
local what = 'permit'
--@include count_or_zero.lua
--@include quarantine.lua
local have = tonumber(v)
if have >= tonumber(ARGV[1]) then
  local q = quarantine_refusal(KEYS[2])   -- the only optional key
  if q then
    return q
  end
  redis.call('decrby', KEYS[1], ARGV[1])
  return nil
end
return have
