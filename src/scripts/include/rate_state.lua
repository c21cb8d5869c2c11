-- Fragment (--@include, see cmake/embed_scripts.cmake) of the rate
-- limiter's scripts (Redisson's RRateLimiter layout): checks every key's
-- type before anything is written, and reads the configuration.
--
-- KEYS[1]  the configuration: a hash of rate, interval (ms), type ("0"
--          OVERALL, "1" PER_CLIENT) and keepAliveTime (ms)
-- KEYS[2]  {name}:value, the permits left (OVERALL)
-- KEYS[3]  {name}:value:<client id>, the same per client (PER_CLIENT)
-- KEYS[4]  {name}:permits, the grants (sorted set, score = when, in ms)
-- KEYS[5]  {name}:permits:<client id>, the same per client
--
-- Sets: rate, interval, keep (numbers; rate nil when no rate is set), rtype
-- ("0"/"1"), vkey and pkey (this client's value and grants keys by the
-- type). A key of another type, or a hash with fields that are not a rate
-- limiter's (a lock's), is refused (WRONGTYPE).
local function key_type(k)
  return redis.call('type', k)['ok']
end
--@include rate_fields.lua
local cfgtype = key_type(KEYS[1])
local rate, interval, rtype, keep
if cfgtype == 'hash' then
  local f, only = rate_fields(KEYS[1])
  if not only then
    return redis.error_reply('WRONGTYPE the key holds a hash that is not a rate limiter')
  end
  rate, interval, rtype, keep = tonumber(f[1]), tonumber(f[2]), f[3], tonumber(f[4] or '0')
  if not rate or not interval or not rtype then
    rate = nil
  end
elseif cfgtype ~= 'none' then
  return redis.error_reply('WRONGTYPE the key holds a ' .. cfgtype .. ', not a rate limiter')
end
for i = 2, 5 do
  local t = key_type(KEYS[i])
  local want = i <= 3 and 'string' or 'zset'
  if t ~= 'none' and t ~= want then
    return redis.error_reply('WRONGTYPE ' .. KEYS[i] .. ' holds a ' .. t ..
                             ', not a rate limiter\'s ' .. want)
  end
  if t == 'string' and not string.match(redis.call('get', KEYS[i]), '^%-?%d+$') then
    return redis.error_reply('WRONGTYPE ' .. KEYS[i] .. ' holds a string that is not a count')
  end
end
local vkey, pkey = KEYS[2], KEYS[4]
if rtype == '1' then
  vkey, pkey = KEYS[3], KEYS[5]
end
-- The permits of the grants in pkey scored from..to.
local function granted(from, to)
  return rate_granted(pkey, from, to)
end
-- The permits left at `now`: the grants older than the interval are dropped
-- and their permits given back, and a count above what the live grants
-- leave (a release() gave some back early) is brought down to it.
local function settle(now)
  local left = redis.call('get', vkey)
  if not left then
    return nil
  end
  left = tonumber(left)
  local cutoff = now - interval
  local freed = granted(0, cutoff)
  if freed > 0 then
    redis.call('zremrangebyscore', pkey, 0, cutoff)
    left = left + freed
    if left > rate then
      left = rate - granted('-inf', '+inf')
    end
    redis.call('set', vkey, left)
  end
  return left
end
-- The keys' lifetimes after a change: keepAliveTime when set (every
-- touched key lives that long), else the configuration's own TTL, if any.
local function keep_alive()
  if keep and keep > 0 then
    redis.call('pexpire', KEYS[1], keep)
    redis.call('pexpire', vkey, keep)
    redis.call('pexpire', pkey, keep)
  else
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then
      redis.call('pexpire', vkey, ttl)
      redis.call('pexpire', pkey, ttl)
    end
  end
end
