-- Delete a lock whoever holds it, and wake its waiters (Redisson's forceUnlock).
--
-- KEYS[1]  the lock (hash)
-- KEYS[2]  the lock's channel
--
-- Returns 1 when a lock was deleted, 0 when there was none. A key of another
-- type is left alone: force release must not destroy data that is not a lock.
--@include lock_shape.lua
local t = redis.call('type', KEYS[1]).ok
if t ~= 'hash' and t ~= 'none' then
  return redis.error_reply('WRONGTYPE key holds a ' .. t .. ', not a lock')
end
-- A lock's fields are owner ids ("<uuid>:<thread>") holding counts; any
-- other hash is somebody's data that happens to have the lock's name.
if t == 'hash' and not_a_lock(KEYS[1]) then
  return redis.error_reply('WRONGTYPE key holds a hash that is not a lock')
end
if redis.call('del', KEYS[1]) == 1 then
  redis.call('publish', KEYS[2], '0')
  return 1
end
return 0
