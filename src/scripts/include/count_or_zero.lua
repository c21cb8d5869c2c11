-- Fragment (--@include, see cmake/embed_scripts.cmake) of the semaphore's
-- and the latch's scripts: v = the count KEYS[1] holds; the script answers 0
-- when there is none, and a string that is not a count is refused
-- (WRONGTYPE; a key of another type raises it at GET) before anything is
-- written. Needs: what ("permit", "latch": the count's name in the message).
local v = redis.call('get', KEYS[1])
if not v then
  return 0
end
if not string.match(v, '^%-?%d+$') then
  return redis.error_reply('WRONGTYPE the key holds a string that is not a ' .. what .. ' count')
end
