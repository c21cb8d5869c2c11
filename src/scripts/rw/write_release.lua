-- Release one write hold of a read-write lock (layout: read_acquire.lua). A
-- release retried after a lost reply answers what the first attempt did,
-- through the request's unlock latch (as scripts/lock/release.lua).
--
-- KEYS[1]  the lock (hash)
-- KEYS[2]  the lock's channel, redisson_rwlock:{name}
-- KEYS[3]  this request's latch, redisson_unlock_latch:{name}:<32 hex>
-- KEYS[4]  the name's key prefix, {name} (a reader's timeout keys are
--          <prefix>:<reader>:rwlock_timeout:<k>)
-- KEYS[5]  (optional) the lock-delay marker, dlock_lock_delay:{name}: the
--          writer's goes with its last write hold, and with a release that
--          finds it holding none (it lost the lock and says so)
-- ARGV[1]  the writer's field, <owner id>:write
-- ARGV[2]  lease in ms to restore while write holds remain (a watchdog hold;
--          never lowers the TTL); "0" keeps the TTL
-- ARGV[3]  latch lifetime in ms
-- ARGV[4]  (optional) the caller's lock-delay in ms (dlock's own): the
--          marker follows a restored lease
--
-- The last write hold: when nothing else is left the lock is deleted; when the
-- writer still holds read holds the mode becomes "read" and the lock stays,
-- as long as the longest of them. Either way "1" is published (wakes every
-- waiter: the readers may all come in). Redisson publishes only in the first
-- case and keeps the writer's TTL in the second; dlock's "1" there spares the
-- waiting readers a sleep until the TTL, and the lock then lives as long as
-- its read holds, as read_release.lua keeps it.
-- Returns nil when the owner holds no write hold, 0 when it still holds some,
-- and when its last went 1, or 2 when some client heard the message. The
-- latch keeps 0 or 1.
local latch, life = KEYS[3], ARGV[3]
--@include unlock_latch.lua
--@include delay.lua
--@include rw_longest.lua
--@include own_keys.lua
local lock, field = KEYS[1], ARGV[1]
local marker = own_keys(5)['dlock_lock_delay:']
--@include rw_mode.lua
local count = mode == 'write' and tonumber(redis.call('hget', lock, field))
if not count or count < 1 then   -- free, read holds only, or another's write hold
  -- Lost, and its owner says it has stopped: its delay ends, and waiters
  -- sleeping through it are woken if the lock is free.
  if delay_clear(marker, field) and not mode then
    redis.call('publish', KEYS[2], '1')
  end
  return nil
end

if count > 1 then
  redis.call('hset', lock, field, count - 1)
  -- Renewed by the watchdog: back to its timeout (never shorter: the
  -- writer's read holds may have a longer lease).
  if tonumber(ARGV[2]) > redis.call('pttl', lock) then
    redis.call('pexpire', lock, ARGV[2])
    delay_extend(delay_key(ARGV[4], marker), ARGV[2], tonumber(ARGV[4]))
  end
  return latched(0)
end
redis.call('hdel', lock, field)
delay_clear(marker, field)
-- The writer's read holds (its own field; a field left by a reader whose
-- holds lapsed counts if alive): the longest left, if any.
-- Expiry times to the ms where Redis tells them (PEXPIRETIME, 7.0+; see
-- read_acquire.lua), else remaining times.
local exact = type(redis.pcall('pexpiretime', lock)) == 'number'
local kv = redis.call('hgetall', lock)
local longest = longest_hold(exact and 'pexpiretime' or 'pttl', kv, KEYS[4], nil, false)
if longest > 0 then
  redis.call('hset', lock, 'mode', 'read')
  redis.call(exact and 'pexpireat' or 'pexpire', lock, longest)
else
  redis.call('del', lock)
end
return released(redis.call('publish', KEYS[2], '1'))
