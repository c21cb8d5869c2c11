-- Give a held permit a new lease, counted from now (Redisson's
-- updateLeaseTime).
--
-- KEYS[1]  the semaphore: a string holding the available permits
-- KEYS[2]  the leases, {name}:timeout (see acquire.lua)
-- KEYS[3]  the channel, redisson_sc:{name}
-- ARGV[1]  the permit id, 16 bytes
-- ARGV[2]  the new lease in ms
-- KEYS[4]  (optional) with a lock-delay: the set dlock_permit_delay:{name}, whose entry
--          for the permit follows the new lease
-- ARGV[3]  (optional) with a lock-delay: the delay in ms
--
-- Expired permits go back to the pool first (the new count is published), so
-- a permit whose lease ran out cannot be revived. Returns 1 when updated, 0
-- when no permit has this id (released, expired, never acquired). Keys of
-- other types are refused (WRONGTYPE) before anything is written.
local sem, leases, channel, id = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
local pset, delay = KEYS[4], tonumber(ARGV[3])
--@include delay.lua

--@include permit_count.lua
--@include now.lua
local bad = delay_wrongtype(pset, 'zset')
if bad then
  return bad
end

--@include permit_sweep.lua
if not redis.call('zscore', leases, id) then
  return 0
end
redis.call('zadd', leases, now + tonumber(ARGV[2]), id)
rdelay_write(pset, id, ARGV[2], delay)
return 1
