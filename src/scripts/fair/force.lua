-- Delete a fair lock whoever holds it, and wake the head of the queue
-- (Redisson's forceUnlock of an RFairLock). The queue stays.
--
-- KEYS[1]  the lock (hash)
-- KEYS[2]  the queue, redisson_lock_queue:{name}
-- KEYS[3]  the deadlines, redisson_lock_timeout:{name}
-- KEYS[4]  the channels' prefix, redisson_lock__channel:{name}
-- ARGV[1]  the grace in ms (the configured fair wait timeout): the woken
--          head's deadline is cut to now + grace at most (its turn starts
--          now; see acquire.lua)
--
-- Returns 1 when a lock was deleted, 0 when there was none. A key of another
-- type, or a hash that is not a lock, is left alone.
--@include lock_shape.lua
--@include fair_wake.lua
local t = redis.call('type', KEYS[1]).ok
if t ~= 'hash' and t ~= 'none' then
  return redis.error_reply('WRONGTYPE the key holds a ' .. t)
end
if t == 'hash' and not_a_lock(KEYS[1]) then
  return redis.error_reply('WRONGTYPE the key holds a hash that is not a lock')
end
if redis.call('del', KEYS[1]) == 0 then
  return 0
end
--@include now.lua
wake_head(KEYS[2], KEYS[3], KEYS[4], now, tonumber(ARGV[1]))
return 1
