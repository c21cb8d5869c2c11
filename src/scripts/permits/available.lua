-- The available permits of a permit-expirable semaphore (Redisson's
-- availablePermits), after expired permits went back to the pool.
--
-- KEYS[1]  the semaphore: a string holding the available permits
-- KEYS[2]  the leases, {name}:timeout (see acquire.lua)
-- KEYS[3]  the channel, redisson_sc:{name}
--
-- Returns {available, held}: the count (0 when the key does not exist), and
-- the permits held under a lease (Redisson's acquiredPermits). Keys of other
-- types are refused (WRONGTYPE) before anything is written.
local sem, leases, channel = KEYS[1], KEYS[2], KEYS[3]

local v = redis.call('get', sem)
if v and not string.match(v, '^%-?%d+$') then
  return redis.error_reply('WRONGTYPE the key holds a string that is not a permit count')
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local gone = redis.call('zrangebyscore', leases, 0, now)
if #gone > 0 then
  for i = 1, #gone, 1000 do
    redis.call('zrem', leases, unpack(gone, i, math.min(i + 999, #gone)))
  end
  local back = redis.call('incrby', sem, #gone)
  if back > 0 then
    redis.call('publish', channel, back)
  end
end
return {tonumber(redis.call('get', sem) or '0'), redis.call('zcard', leases)}
