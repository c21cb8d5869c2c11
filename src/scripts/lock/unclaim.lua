-- Give up a reservation (lock_acquire.lua) when its owner stops waiting
-- (deadline, cancellation), so that the others need not wait out its grace.
--
-- KEYS[1]  the lock (hash)
-- KEYS[2]  the reservation, dlock_lock_next:{name}
-- KEYS[3]  the lock's channel
-- ARGV[1]  owner id
--
-- Returns 1 when the owner's reservation was removed, 0 when it had none.
-- When the lock is free, "0" is published: the waiters held back by the
-- reservation try again now.
local r = redis.pcall('get', KEYS[2])
if type(r) ~= 'string' or r ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[2])
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('publish', KEYS[3], '0')
end
return 1
