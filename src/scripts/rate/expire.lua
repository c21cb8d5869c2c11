-- Give every key of a rate limiter a time to live, or take it away
-- (Redisson's expire and clearExpire of an RRateLimiter: its five keys).
--
-- KEYS[1]  the configuration hash (include/rate_state.lua: KEYS[1..5])
-- KEYS[2]  {name}:value
-- KEYS[3]  {name}:value:<client id>
-- KEYS[4]  {name}:permits
-- KEYS[5]  {name}:permits:<client id>
-- ARGV[1]  the time to live in ms (> 0), or "0" to remove it (PERSIST)
--
-- Returns 1 when any key got the TTL (or lost it), 0 when none did.
-- Keys of other types are refused (WRONGTYPE), nothing changed.
--@include rate_state.lua
local done = 0
for i = 1, 5 do
  local r
  if ARGV[1] == '0' then
    r = redis.call('persist', KEYS[i])
  else
    r = redis.call('pexpire', KEYS[i], ARGV[1])
  end
  if r == 1 then
    done = 1
  end
end
return done
