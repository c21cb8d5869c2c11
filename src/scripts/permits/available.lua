-- The available permits of a permit-expirable semaphore (Redisson's
-- availablePermits), after expired permits went back to the pool.
--
-- KEYS[1]  the semaphore: a string holding the available permits
-- KEYS[2]  the leases, {name}:timeout (see acquire.lua)
-- KEYS[3]  the channel, redisson_sc:{name}
--
-- Returns {available, held}: the count (0 when the key does not exist), and
-- the permits held under a lease (Redisson's acquiredPermits). Keys of other
-- types are refused (WRONGTYPE) before anything is written.
local sem, leases, channel = KEYS[1], KEYS[2], KEYS[3]

--@include permit_count.lua
--@include now.lua

--@include permit_sweep.lua
return {tonumber(redis.call('get', sem) or '0'), redis.call('zcard', leases)}
