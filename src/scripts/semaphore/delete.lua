-- Delete a semaphore (Redisson's delete of an RSemaphore, or of an
-- RPermitExpirableSemaphore with its leases). Waiters keep waiting: a
-- missing semaphore has no permits, and a later set or release wakes them.
--
-- KEYS[1]  the semaphore: a string holding the available permits
-- KEYS[2]  (optional) the leases, {name}:timeout (a permit-expirable one)
--
-- Returns the number of keys deleted. A key of another type, or a string
-- that is not a count, is refused (WRONGTYPE) and nothing is deleted.
local sem = KEYS[1]
--@include permit_count.lua
--@include leases_type.lua
if KEYS[2] then
  return redis.call('del', KEYS[1], KEYS[2])
end
return redis.call('del', KEYS[1])
