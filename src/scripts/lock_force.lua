-- Delete a lock whoever holds it, and wake its waiters (Redisson's forceUnlock).
--
-- KEYS[1]  the lock (hash)
-- KEYS[2]  the lock's channel
--
-- Returns 1 when a lock was deleted, 0 when there was none. A key of another
-- type is left alone: force release must not destroy data that is not a lock.
local t = redis.call('type', KEYS[1]).ok
if t ~= 'hash' and t ~= 'none' then
  return redis.error_reply('WRONGTYPE key holds a ' .. t .. ', not a lock')
end
if redis.call('del', KEYS[1]) == 1 then
  redis.call('publish', KEYS[2], '0')
  return 1
end
return 0
