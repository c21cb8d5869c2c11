-- The permits a rate limiter has left now (Redisson's availablePermits), on
-- the server's clock.
--
-- KEYS[1]  the configuration hash (include/rate_state.lua: KEYS[1..5])
-- KEYS[2]  {name}:value
-- KEYS[3]  {name}:value:<client id>
-- KEYS[4]  {name}:permits
-- KEYS[5]  {name}:permits:<client id>
--
-- Returns the count; a limiter nobody took from yet answers its rate as the
-- configuration stores it (a bulk string, as Redisson's script does) and
-- starts its count there. "DLOCKNOTFOUND ..." when no rate is set.
--@include rate_state.lua
if not rate then
  return redis.error_reply('DLOCKNOTFOUND the rate limiter has no rate set')
end
--@include now.lua
local left = settle(now)
if not left then
  redis.call('set', vkey, rate)
  return redis.call('hget', KEYS[1], 'rate')
end
return left
