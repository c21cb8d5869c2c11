-- Delete a semaphore (Redisson's delete of an RSemaphore, or of an
-- RPermitExpirableSemaphore with its leases). Waiters keep waiting: a
-- missing semaphore has no permits, and a later set or release wakes them.
--
-- KEYS[1]  the semaphore: a string holding the available permits
-- KEYS[2]  (optional) the leases, {name}:timeout (a permit-expirable one)
--
-- Returns the number of keys deleted. A key of another type, or a string
-- that is not a count, is refused (WRONGTYPE) and nothing is deleted.
local v = redis.call('get', KEYS[1])
if v and not string.match(v, '^%-?%d+$') then
  return redis.error_reply('WRONGTYPE the key holds a string that is not a permit count')
end
if KEYS[2] then
  local t = redis.call('type', KEYS[2]).ok
  if t ~= 'none' and t ~= 'zset' then
    return redis.error_reply('WRONGTYPE the leases key holds a ' .. t .. ', not a sorted set')
  end
  return redis.call('del', KEYS[1], KEYS[2])
end
return redis.call('del', KEYS[1])
