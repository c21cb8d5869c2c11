-- Give several permits back in one script, all or nothing (Redisson's
-- tryRelease(List) / release(List)).
--
-- KEYS[1]  the semaphore: a string holding the available permits
-- KEYS[2]  the leases, {name}:timeout (see acquire.lua)
-- KEYS[3]  the channel, redisson_sc:{name}
-- ARGV[1]  the permit ids, 16 bytes each, one after the other (n >= 1,
--          no two alike: the caller checks)
--
-- Every id is checked before anything is written: one unknown (released
-- already, never acquired) or expired id and nothing is released, and the
-- answer is {0, 0, i, why}: i the first such id's place (1-based), why 0
-- unknown, 2 expired. Else expired permits of others go back to the pool
-- (their count published, as every script does), the n permits are given
-- back, the number released (n) is published, as Redisson's list release
-- does (its waiters wake that many of themselves), and the answer is
-- {n, heard}: heard = clients that received it. Keys of other types are
-- refused (WRONGTYPE) before anything is written.
local sem, leases, channel = KEYS[1], KEYS[2], KEYS[3]
local raw = ARGV[1]
if #raw == 0 or #raw % 16 ~= 0 then
  return redis.error_reply('ERR the permit ids are not a multiple of 16 bytes')
end
local n = #raw / 16
local v = redis.call('get', sem)
if v and not string.match(v, '^%-?%d+$') then
  return redis.error_reply('WRONGTYPE the key holds a string that is not a permit count')
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local ids = {}
for i = 1, n do
  ids[i] = string.sub(raw, (i - 1) * 16 + 1, i * 16)
  local score = redis.call('zscore', leases, ids[i])
  if not score then
    return {0, 0, i, 0}
  end
  if tonumber(score) <= now then
    return {0, 0, i, 2}
  end
end

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
for i = 1, n, 1000 do
  redis.call('zrem', leases, unpack(ids, i, math.min(i + 999, n)))
end
redis.call('incrby', sem, n)
local heard = redis.call('publish', channel, n)
return {n, heard}
