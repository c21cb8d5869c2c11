-- Fragment (--@include, see cmake/embed_scripts.cmake) of the permit
-- semaphore's acquire scripts, after permits were taken: a semaphore given a
-- TTL takes its leases with it (as Redisson does); the answer nil. Needs:
-- sem, leases.
local ttl = redis.call('pttl', sem)
if ttl > 0 then
  redis.call('pexpire', leases, ttl)
end
return nil
