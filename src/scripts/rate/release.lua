-- Give permits back to a rate limiter before their window ends (Redisson's
-- RRateLimiter.release): the count rises by them, at most to the rate.
--
-- KEYS[1]  the configuration hash (include/rate_state.lua: KEYS[1..5])
-- KEYS[2]  {name}:value
-- KEYS[3]  {name}:value:<client id>
-- KEYS[4]  {name}:permits
-- KEYS[5]  {name}:permits:<client id>
-- ARGV[1]  the permits (>= 1)
--
-- Returns the count now. "DLOCKNOTFOUND ..." when no rate is set.
--@include rate_state.lua
if not rate then
  return redis.error_reply('DLOCKNOTFOUND the rate limiter has no rate set')
end
local left = tonumber(redis.call('get', vkey) or rate) + tonumber(ARGV[1])
if left > rate then
  left = rate
end
redis.call('set', vkey, left)
keep_alive()
return left
