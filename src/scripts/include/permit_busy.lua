-- Fragment (--@include, see cmake/embed_scripts.cmake) of the permit
-- semaphore's acquire scripts, when the permits are not there: the ms until
-- the earliest lease runs out (the waiter sleeps at most that long: nobody
-- publishes when a lease ends), or -1 when no lease will (wait for a
-- message). Needs: leases, now, NO_EXPIRY.
local first = redis.call('zrange', leases, 0, 0, 'withscores')
if first[2] and tonumber(first[2]) < NO_EXPIRY then
  return math.max(tonumber(first[2]) - now, 1)
end
return -1
