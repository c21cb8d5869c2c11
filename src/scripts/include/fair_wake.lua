-- Fragment (--@include, see cmake/embed_scripts.cmake) of the fair lock's
-- release and force scripts: wake_head(queue, deadlines, channels, now, grace)
-- drops the heads of the queue whose deadline passed (as acquire.lua does),
-- starts the turn of the head left (its deadline cut to now + grace at most)
-- and wakes it on its own channel, channels .. ':' .. its owner id. Answers
-- how many clients heard it (PUBLISH's count); 0 when nobody waits.
local function wake_head(queue, deadlines, channels, now, grace)
  while true do
    local head = redis.call('lindex', queue, 0)
    if not head then
      return 0
    end
    local d = tonumber(redis.call('zscore', deadlines, head))
    if d and d <= now then
      redis.call('zrem', deadlines, head)
      redis.call('lpop', queue)
    else
      if d and d > now + grace then
        redis.call('zadd', deadlines, now + grace, head)
      end
      return redis.call('publish', channels .. ':' .. head, '0')
    end
  end
end
