-- Release permits only to a semaphore that exists (Redisson's
-- releaseIfExists): a missing one is not created.
--
-- KEYS[1]  the semaphore: a string holding the available permits
-- KEYS[2]  its channel, redisson_sc:{name}
-- ARGV[1]  the permits (1..2^31-1, checked by the caller)
-- ARGV[2]  the largest count allowed (2^31-1: Redisson reads counts as ints)
--
-- Returns 1 when released (the new count is published, as Redisson's does),
-- 0 when the semaphore does not exist (nothing written). A key of another
-- type or a string that is not a count is refused (WRONGTYPE), and a count
-- that would pass ARGV[2] is refused (DLOCKOVERBOUND, core.h's word for a
-- count past its bound); nothing is changed then.
local t = redis.call('type', KEYS[1]).ok
if t == 'none' then
  return 0
end
local v = t == 'string' and redis.call('get', KEYS[1])
if not v or not string.match(v, '^%-?%d+$') then
  return redis.error_reply('WRONGTYPE the key holds a ' .. t .. ' that is not a permit count')
end
if tonumber(v) + tonumber(ARGV[1]) > tonumber(ARGV[2]) then
  return redis.error_reply('DLOCKOVERBOUND the count would pass ' .. ARGV[2])
end
local value = redis.call('incrby', KEYS[1], ARGV[1])
redis.call('publish', KEYS[2], value)
return 1
