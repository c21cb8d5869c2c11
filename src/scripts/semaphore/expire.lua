-- Give every key of a semaphore a time to live (Redisson's expire of an
-- RSemaphore, or of an RPermitExpirableSemaphore: both its keys).
--
-- KEYS[1]  the semaphore: a string holding the available permits
-- KEYS[2]  (optional) the leases, {name}:timeout (a permit-expirable one)
-- ARGV[1]  the time to live in ms (> 0), or "0" to remove it (PERSIST)
--
-- Returns 1 when the semaphore key exists (and was given the TTL), 0 when
-- not. Keys of other types are refused (WRONGTYPE) and nothing is changed.
local v = redis.call('get', KEYS[1])
if v and not string.match(v, '^%-?%d+$') then
  return redis.error_reply('WRONGTYPE the key holds a string that is not a permit count')
end
if KEYS[2] then
  local t = redis.call('type', KEYS[2]).ok
  if t ~= 'none' and t ~= 'zset' then
    return redis.error_reply('WRONGTYPE the leases key holds a ' .. t .. ', not a sorted set')
  end
end
local done = 0
for i = 1, #KEYS do
  local r
  if ARGV[1] == '0' then
    r = redis.call('persist', KEYS[i])
    if r == 0 and redis.call('exists', KEYS[i]) == 1 then
      r = 1
    end
  else
    r = redis.call('pexpire', KEYS[i], ARGV[1])
  end
  if i == 1 then
    done = r
  end
end
return done
