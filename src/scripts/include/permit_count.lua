-- Fragment (--@include, see cmake/embed_scripts.cmake) of the permit
-- semaphore's scripts: v = the semaphore's available count as stored (nil when
-- the key does not exist); a string that is not a count is refused
-- (WRONGTYPE) before anything is written. Needs: sem.
local v = redis.call('get', sem)
if v and not string.match(v, '^%-?%d+$') then
  return redis.error_reply('WRONGTYPE the key holds a string that is not a permit count')
end
