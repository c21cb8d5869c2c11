-- Fragment (--@include, see cmake/embed_scripts.cmake) of the rate
-- limiter's scripts and of the inspection: reads Redisson's RRateLimiter
-- layout, writes nothing.
--
-- rate_fields(key): the values of hash key's rate, interval, type and
-- keepAliveTime (HMGET: false where absent), and whether the hash has no
-- other field (a lock's hash has none of these and others).
-- rate_granted(pkey, from, to): the permits granted in sorted set pkey
-- between scores from and to.
local function rate_fields(key)
  local f = redis.call('hmget', key, 'rate', 'interval', 'type', 'keepAliveTime')
  local known = 0
  for i = 1, 4 do
    if f[i] then
      known = known + 1
    end
  end
  return f, redis.call('hlen', key) == known
end
-- The permits of the grants in sorted set pkey scored from..to (a grant is
-- its id's length in one byte, the id, and the permits as a native unsigned
-- int: struct 'Bc0I', as Redisson writes it).
local function rate_granted(pkey, from, to)
  local n = 0
  for _, g in ipairs(redis.call('zrangebyscore', pkey, from, to)) do
    local _, permits = struct.unpack('Bc0I', g)
    n = n + permits
  end
  return n
end
