-- Give a held permit a new lease, counted from now (Redisson's
-- updateLeaseTime).
--
-- KEYS[1]  the semaphore: a string holding the available permits
-- KEYS[2]  the leases, {name}:timeout (see acquire.lua)
-- KEYS[3]  the channel, redisson_sc:{name}
-- ARGV[1]  the permit id, 16 bytes
-- ARGV[2]  the new lease in ms
--
-- Expired permits go back to the pool first (the new count is published), so
-- a permit whose lease ran out cannot be revived. Returns 1 when updated, 0
-- when no permit has this id (released, expired, never acquired). Keys of
-- other types are refused (WRONGTYPE) before anything is written.
local sem, leases, channel, id = KEYS[1], KEYS[2], KEYS[3], ARGV[1]

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
if not redis.call('zscore', leases, id) then
  return 0
end
redis.call('zadd', leases, now + tonumber(ARGV[2]), id)
return 1
