-- Set a semaphore's available permits: only when it has none set yet
-- (Redisson's trySetPermits), or whatever it holds.
--
-- KEYS[1]  the semaphore: a string holding the available permits
-- KEYS[2]  its channel, redisson_sc:{name}
-- ARGV[1]  the permits (0..2^31-1, checked by the caller)
-- ARGV[2]  "1": only when the key does not exist; "0": always
--
-- Returns 1 when set, 0 when it existed already (ARGV[2] = "1"). A positive
-- count is published, as Redisson's trySetPermits does: waiters try again.
-- A key of another type, or a string that is not a count, is refused
-- (WRONGTYPE) and left alone. SET drops a TTL the key had, as Redisson's does.
local v = redis.call('get', KEYS[1])
if v then
  if not string.match(v, '^%-?%d+$') then
    return redis.error_reply('WRONGTYPE the key holds a string that is not a permit count')
  end
  if ARGV[2] == '1' then
    return 0
  end
end
redis.call('set', KEYS[1], ARGV[1])
if tonumber(ARGV[1]) > 0 then
  redis.call('publish', KEYS[2], ARGV[1])
end
return 1
