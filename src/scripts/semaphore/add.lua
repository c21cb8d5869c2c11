-- Add permits to a semaphore, or take some away (a release is an add of n):
-- Redisson's release, addPermits and releaseIfExists share this effect.
-- Used by the permit-expirable semaphore too (same count, same channel).
--
-- KEYS[1]  the semaphore: a string holding the available permits (created at
--          0 when absent)
-- KEYS[2]  its channel, redisson_sc:{name}
-- ARGV[1]  the change (non-zero; negative takes permits away)
-- ARGV[2]  the largest count either way (2^31-1: Redisson reads it as a Java int)
--
-- Returns {count, heard}: the new count, and how many clients heard the
-- message. The new count is published when it is positive (what a waiter
-- can be served; Redisson's waiters wake that many of theirs, dlock's
-- waiters whose needs fit in it). A count that would leave the range is
-- refused (EINVAL) and nothing changes; a key that is not a count likewise
-- (WRONGTYPE). INCRBY keeps a TTL the key may have.
local v = redis.call('get', KEYS[1])
local have = 0
if v then
  if not string.match(v, '^%-?%d+$') then
    return redis.error_reply('WRONGTYPE the key holds a string that is not a permit count')
  end
  have = tonumber(v)
end
local new, max = have + tonumber(ARGV[1]), tonumber(ARGV[2])
if new > max or new < -max then
  return redis.error_reply('EINVAL the semaphore would hold ' .. string.format('%d', new) ..
                           ' permits (' .. string.format('%d', have) .. ' now), beyond +-' .. ARGV[2])
end
redis.call('incrby', KEYS[1], ARGV[1])
local heard = 0
if new > 0 then
  heard = redis.call('publish', KEYS[2], new)
end
return {new, heard}
