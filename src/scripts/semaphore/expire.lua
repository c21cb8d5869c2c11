-- Give every key of a semaphore a time to live (Redisson's expire of an
-- RSemaphore, or of an RPermitExpirableSemaphore: both its keys).
--
-- KEYS[1]  the semaphore: a string holding the available permits
-- KEYS[2]  (optional) the leases, {name}:timeout (a permit-expirable one)
-- ARGV[1]  the time to live in ms (> 0), or "0" to remove it (PERSIST)
--
-- Returns 1 when any of the keys got the TTL (or, for "0", lost one), 0
-- when none did (Redisson's rule for an object of several keys). Keys of
-- other types are refused (WRONGTYPE) and nothing is changed.
local sem = KEYS[1]
--@include permit_count.lua
--@include leases_type.lua
local done = 0
for i = 1, #KEYS do
  local r
  if ARGV[1] == '0' then
    r = redis.call('persist', KEYS[i])
  else
    r = redis.call('pexpire', KEYS[i], ARGV[1])
  end
  if r == 1 then
    done = 1
  end
end
return done
