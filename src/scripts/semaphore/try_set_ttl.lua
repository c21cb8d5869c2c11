-- Set a semaphore's permits with a time to live, only when it does not
-- exist (Redisson's trySetPermits(permits, timeToLive)).
--
-- KEYS[1]  the semaphore: a string holding the available permits
-- KEYS[2]  its channel, redisson_sc:{name}
-- ARGV[1]  the permits (0..2^31-1, checked by the caller)
-- ARGV[2]  the time to live in ms (> 0)
--
-- Returns 1 when set, 0 when it existed already (unchanged). When set, the
-- permits are published whatever their number, as Redisson's does, so that
-- waiters on the missing semaphore try again. A key of another type, or a
-- string that is not a count, is refused (WRONGTYPE) and left alone.
local t = redis.call('type', KEYS[1]).ok
if t ~= 'none' then
  if t ~= 'string' or not string.match(redis.call('get', KEYS[1]), '^%-?%d+$') then
    return redis.error_reply('WRONGTYPE the key holds a ' .. t .. ' that is not a permit count')
  end
  return 0
end
redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2])
redis.call('publish', KEYS[2], ARGV[1])
return 1
