-- What is left of a permit's lease (Redisson's getLeaseTime).
--
-- KEYS[1]  the semaphore: a string holding the available permits
-- KEYS[2]  the leases, {name}:timeout (see acquire.lua)
-- KEYS[3]  the channel, redisson_sc:{name}
-- ARGV[1]  the permit id, 16 bytes
--
-- Expired permits go back to the pool first (the new count is published), as
-- Redisson's does. Returns the ms left (>= 1), -1 for a permit without a
-- lease (Redisson's no-expiry score), -2 when no permit has this id
-- (released, expired, never acquired). Keys of other types are refused
-- (WRONGTYPE) before anything is written.
local sem, leases, channel, id = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
local NO_EXPIRY = 922337203685477
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
local score = redis.call('zscore', leases, id)
if not score then
  return -2
end
if tonumber(score) >= NO_EXPIRY then
  return -1
end
return math.max(tonumber(score) - now, 1)
