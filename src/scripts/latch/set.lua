-- Give a count-down latch its count when it has none (Redisson's
-- trySetCount): the latch is at zero when its key does not exist.
--
-- KEYS[1]  the latch: a string holding the remaining count
-- KEYS[2]  its channel, redisson_countdownlatch__channel__{name}
-- ARGV[1]  the count (1..2^31-1, checked by the caller)
--
-- Returns 1 when set ("1" is published, Redisson's new-count message), 0 when
-- the latch still counts. A key of another type, or a string that is not a
-- count, is refused (WRONGTYPE) and left alone.
local v = redis.call('get', KEYS[1])
if v then
  if not string.match(v, '^%-?%d+$') then
    return redis.error_reply('WRONGTYPE the key holds a string that is not a latch count')
  end
  return 0
end
redis.call('set', KEYS[1], ARGV[1])
redis.call('publish', KEYS[2], '1')
return 1
