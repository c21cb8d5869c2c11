-- Set a rate limiter's rate (Redisson's trySetRate, setRate, updateRate).
--
-- KEYS[1]  the configuration hash (include/rate_state.lua: KEYS[1..5])
-- KEYS[2]  {name}:value
-- KEYS[3]  {name}:value:<client id>
-- KEYS[4]  {name}:permits
-- KEYS[5]  {name}:permits:<client id>
-- ARGV[1]  the rate (permits per interval, >= 1)
-- ARGV[2]  the interval in ms (>= 1)
-- ARGV[3]  the type: "0" OVERALL, "1" PER_CLIENT
-- ARGV[4]  keepAliveTime in ms (0: none; else >= the interval)
-- ARGV[5]  "try": only when none is set (each field set only if absent);
--          "set": set it; "update": set it only when one is set
-- ARGV[6]  "1": keep the state (the grants in the window count against
--          the new rate), "0": start afresh (not for "try")
--
-- Returns 1 when set, 0 when not ("try": one was set; "update": none
-- was). Keys of other types are refused (WRONGTYPE), nothing written.
--@include rate_state.lua
local mode = ARGV[5]
local keepms = tonumber(ARGV[4])
if mode == 'try' then
  redis.call('hsetnx', KEYS[1], 'rate', ARGV[1])
  redis.call('hsetnx', KEYS[1], 'interval', ARGV[2])
  redis.call('hsetnx', KEYS[1], 'keepAliveTime', ARGV[4])
  local set = redis.call('hsetnx', KEYS[1], 'type', ARGV[3])
  if set == 1 and keepms > 0 then
    redis.call('pexpire', KEYS[1], keepms)
  end
  return set
end
if mode == 'update' and cfgtype == 'none' then
  return 0
end
redis.call('hset', KEYS[1], 'rate', ARGV[1], 'interval', ARGV[2], 'type', ARGV[3],
           'keepAliveTime', ARGV[4])
if keepms > 0 then
  redis.call('pexpire', KEYS[1], keepms)
end
local was = rtype
rate, interval, rtype, keep = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], keepms
vkey, pkey = KEYS[2], KEYS[4]
if rtype == '1' then
  vkey, pkey = KEYS[3], KEYS[5]
end
if was and was ~= rtype then
  redis.call('del', KEYS[2], KEYS[3], KEYS[4], KEYS[5])   -- the other type's state
  return 1
end
if ARGV[6] ~= '1' then
  redis.call('del', vkey, pkey)
  return 1
end
--@include now.lua
redis.call('zremrangebyscore', pkey, 0, now - interval)
redis.call('set', vkey, math.max(rate - granted('-inf', '+inf'), 0))
keep_alive()
return 1
