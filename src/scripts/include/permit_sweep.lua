-- Fragment (--@include, see cmake/embed_scripts.cmake) of the permit
-- semaphore's scripts: the permits whose lease ran out by now go back to the
-- pool, and a positive new count is published. ZRANGEBYSCORE raises WRONGTYPE
-- for a leases key of another type, before the first write. Needs: sem,
-- leases, channel, now.
local gone = redis.call('zrangebyscore', leases, 0, now)
if #gone > 0 then
  for i = 1, #gone, 1000 do
    redis.call('zrem', leases, unpack(gone, i, math.min(i + 999, #gone)))
  end
  local back = redis.call('incrby', sem, #gone)
  if back > 0 then
    redis.call('publish', channel, back)
  end
end
