-- Fragment (--@include, see cmake/embed_scripts.cmake) of the semaphore's
-- scripts that act on both keys of a permit semaphore: the leases key
-- (KEYS[2], when given) of another type than a sorted set is refused
-- (WRONGTYPE) before anything is written.
if KEYS[2] then
  local t = redis.call('type', KEYS[2]).ok
  if t ~= 'none' and t ~= 'zset' then
    return redis.error_reply('WRONGTYPE the leases key holds a ' .. t .. ', not a sorted set')
  end
end
