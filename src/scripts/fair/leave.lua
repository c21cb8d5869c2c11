-- A waiter leaves the fair lock's queue (deadline, cancellation, error):
-- everybody behind it moves up a slot, as in Redisson; beyond Redisson, when
-- it was the head and the lock is free, the new head's turn starts (its
-- deadline cut to now + grace at most, see acquire.lua) and it is woken at
-- once instead of sleeping until the leaver's deadline.
--
-- KEYS[1]  the queue, redisson_lock_queue:{name}
-- KEYS[2]  the deadlines, redisson_lock_timeout:{name}
-- KEYS[3]  the lock (hash)
-- KEYS[4]  the channels' prefix, redisson_lock__channel:{name}
-- ARGV[1]  owner id
-- ARGV[2]  its slot in ms (as given to acquire.lua)
-- ARGV[3]  the grace a new head is owed once the lock is free, in ms (the
--          configured fair wait timeout, as ARGV[6] of acquire.lua)
--
-- Returns 1 when the owner was in the queue, 0 when not.
local queue, deadlines, owner = KEYS[1], KEYS[2], ARGV[1]
local pos = redis.call('lpos', queue, owner)
redis.call('zrem', deadlines, owner)
if not pos then
  return 0
end
local behind = redis.call('lrange', queue, pos + 1, -1)
for i = 1, #behind do
  if redis.call('zscore', deadlines, behind[i]) then
    redis.call('zincrby', deadlines, -tonumber(ARGV[2]), behind[i])
  end
end
redis.call('lrem', queue, 1, owner)
if pos == 0 and redis.call('exists', KEYS[3]) == 0 then
  local head = redis.call('lindex', queue, 0)
  if head then
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local d = tonumber(redis.call('zscore', deadlines, head))
    if d and d > now + tonumber(ARGV[3]) then
      redis.call('zadd', deadlines, now + tonumber(ARGV[3]), head)
    end
    redis.call('publish', KEYS[4] .. ':' .. head, '0')
  end
end
return 1
