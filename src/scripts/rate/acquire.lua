-- Take permits of a rate limiter (Redisson's RRateLimiter.tryAcquire), on
-- the server's clock.
--
-- KEYS[1]  the configuration hash (include/rate_state.lua: KEYS[1..5])
-- KEYS[2]  {name}:value
-- KEYS[3]  {name}:value:<client id>
-- KEYS[4]  {name}:permits
-- KEYS[5]  {name}:permits:<client id>
-- ARGV[1]  the permits (>= 1)
-- ARGV[2]  the grant's id (16 random bytes)
--
-- Returns {1, now, left} when granted (now: the grant's score, the server's
-- ms; left: the permits left in the window), or {0, delay}: none granted,
-- the oldest grant frees its permits in delay ms. Refusals, nothing
-- written: "DLOCKNOTFOUND ..." (no rate set), "EINVAL ..." (more permits
-- than the rate), WRONGTYPE (include/rate_state.lua).
--@include rate_state.lua
if not rate then
  return redis.error_reply('DLOCKNOTFOUND the rate limiter has no rate set')
end
local want = tonumber(ARGV[1])
if want > rate then
  return redis.error_reply('EINVAL permits ' .. want .. ' exceed the rate, ' .. rate ..
                           ' per interval')
end
--@include now.lua
local left = settle(now)
if left and left < want then
  local first = redis.call('zrange', pkey, 0, 0, 'withscores')
  if first[2] then
    keep_alive()
    local delay = 3 + interval - (now - tonumber(first[2]))
    return {0, math.max(delay, 1)}
  end
  left = nil   -- no grant to wait for (released early): the window is whole
end
if not left then
  left = rate
end
redis.call('zadd', pkey, now, struct.pack('Bc0I', string.len(ARGV[2]), ARGV[2], want))
redis.call('set', vkey, left - want)
keep_alive()
return {1, now, left - want}
