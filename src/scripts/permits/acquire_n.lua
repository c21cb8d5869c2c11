-- Take n permits of a permit-expirable semaphore at once, all or none
-- (Redisson's acquire(permits, lease) / tryAcquire(permits, wait, lease)),
-- under the caller's n permit ids, each with the same lease.
--
-- KEYS[1]  the semaphore: a string holding the available permits
-- KEYS[2]  the leases, {name}:timeout (see acquire.lua)
-- KEYS[3]  the channel, redisson_sc:{name}
-- ARGV[1]  the lease in ms (the watchdog timeout for watchdog permits)
-- ARGV[2]  the n permit ids, 16 bytes each, one after the other (n >= 1)
--
-- Expired permits go back to the pool first (the new count is published).
-- Returns nil when the n permits are taken. Ids that already hold permits
-- are an attempt retried after its answer was lost (the permits are taken
-- all together): their leases are set again and nil returned. Otherwise, as
-- acquire.lua, the ms until the earliest lease runs out, or -1 when no lease
-- will. Refused before anything is written: a semaphore key that is not a
-- count or a leases key of another type (WRONGTYPE), and n larger than the
-- semaphore's total, available + held (ERR: it could never be served as it
-- stands); a missing semaphore has no permits yet, and is waited for.
local sem, leases, channel = KEYS[1], KEYS[2], KEYS[3]
local NO_EXPIRY = 922337203685477
local raw = ARGV[2]
if #raw == 0 or #raw % 16 ~= 0 then
  return redis.error_reply('ERR the permit ids are not a multiple of 16 bytes')
end
local n = #raw / 16
local ids = {}
for i = 1, n do
  ids[i] = string.sub(raw, (i - 1) * 16 + 1, i * 16)
end

local v = redis.call('get', sem)
if v and not string.match(v, '^%-?%d+$') then
  return redis.error_reply('WRONGTYPE the key holds a string that is not a permit count')
end
local held = redis.call('zcard', leases)   -- WRONGTYPE before any write
if v and n > tonumber(v) + held then
  return redis.error_reply('ERR ' .. n .. ' permits asked of a semaphore of ' ..
                           (tonumber(v) + held) .. ' in all')
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

local until_ms = now + tonumber(ARGV[1])
if redis.call('zscore', leases, ids[1]) then
  for i = 1, n do
    if redis.call('zscore', leases, ids[i]) then
      redis.call('zadd', leases, until_ms, ids[i])
    end
  end
  return nil
end
local have = tonumber(redis.call('get', sem) or '0')
if have >= n then
  redis.call('decrby', sem, n)
  for i = 1, n do
    redis.call('zadd', leases, until_ms, ids[i])
  end
  local ttl = redis.call('pttl', sem)
  if ttl > 0 then
    redis.call('pexpire', leases, ttl)
  end
  return nil
end
local first = redis.call('zrange', leases, 0, 0, 'withscores')
if first[2] and tonumber(first[2]) < NO_EXPIRY then
  return math.max(tonumber(first[2]) - now, 1)
end
return -1
