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
local t = redis.call('type', KEYS[1]).ok
if t ~= 'hash' and t ~= 'none' then
  return redis.error_reply('WRONGTYPE the key holds a ' .. t)
end
if t == 'hash' then
  local kv = redis.call('hgetall', KEYS[1])
  for i = 1, #kv, 2 do
    if not string.find(kv[i], ':', 1, true) or not tonumber(kv[i + 1]) then
      return redis.error_reply('WRONGTYPE the key holds a hash that is not a lock')
    end
  end
end
if redis.call('del', KEYS[1]) == 0 then
  return 0
end
local tm = redis.call('time')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then
    break
  end
  local d = tonumber(redis.call('zscore', KEYS[3], head))
  if d and d <= now then
    redis.call('zrem', KEYS[3], head)
    redis.call('lpop', KEYS[2])
  else
    if d and d > now + tonumber(ARGV[1]) then
      redis.call('zadd', KEYS[3], now + tonumber(ARGV[1]), head)
    end
    redis.call('publish', KEYS[4] .. ':' .. head, '0')
    break
  end
end
return 1
