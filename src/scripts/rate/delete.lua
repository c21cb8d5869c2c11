-- Delete a rate limiter (Redisson's delete of an RRateLimiter: its five
-- keys).
--
-- KEYS[1]  the configuration hash (include/rate_state.lua: KEYS[1..5])
-- KEYS[2]  {name}:value
-- KEYS[3]  {name}:value:<client id>
-- KEYS[4]  {name}:permits
-- KEYS[5]  {name}:permits:<client id>
--
-- Returns 1 when any key was deleted, 0 when none existed. Keys of other
-- types are somebody else's: refused (WRONGTYPE), never deleted.
--@include rate_state.lua
if redis.call('del', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]) > 0 then
  return 1
end
return 0
