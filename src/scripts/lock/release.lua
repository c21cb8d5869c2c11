-- Release one hold of a reentrant lock. A release retried after a lost reply
-- answers what the first attempt did, through a short-lived latch keyed by the
-- request id (Redisson 4's unlock latch), instead of "not held".
--
-- KEYS[1]  the lock (hash)
-- KEYS[2]  the lock's channel, redisson_lock__channel:{name}
-- KEYS[3]  this request's latch, redisson_unlock_latch:{name}:<32 hex>
-- KEYS[4]  (optional) the lock-delay marker, dlock_lock_delay:{name} (see
--          acquire.lua): the owner's is deleted by its last release, and by a
--          release that finds the owner holding nothing (it lost the lock and
--          says so: its delay is over, the lock reopens)
-- KEYS[5]  (optional) the reservation, dlock_lock_next:{name} (see acquire.lua);
--          KEYS[4..5] in any order, known by their prefixes
-- ARGV[1]  owner id
-- ARGV[2]  lease in ms to set while holds remain; "0" keeps the current TTL
--          (a lock taken with an explicit lease keeps its deadline)
-- ARGV[3]  latch lifetime in ms
-- ARGV[4]  reservation grace in ms
-- ARGV[5]  (optional) the caller's lock-delay in ms (see acquire.lua): a
--          release that keeps holds moves the marker's end with the lease
--
-- Returns 0 when holds remain, nil when the owner holds nothing (its
-- marker deleted: an unlock message wakes a waiter if the lock is free), and
-- when the
-- last hold went (key deleted, "0" published: wakes one waiter, Redisson's or
-- dlock's) 2 if some client heard the unlock message, 1 if none did. The latch
-- keeps 1 for both (Redisson's value), so a retried release answers 1.
-- A read-write lock's hash (a "mode" field; the owner's field is then its
-- read hold) answers WRONGTYPE and is left as it is.
local latch, life = KEYS[3], ARGV[3]
--@include unlock_latch.lua
--@include delay.lua
--@include own_keys.lua
local lock, owner = KEYS[1], ARGV[1]
local delay = tonumber(ARGV[5] or '0')
local own = own_keys(4)
local marker, reserve = own['dlock_lock_delay:'], own['dlock_lock_next:']
local v = redis.call('hmget', lock, owner, 'mode')   -- WRONGTYPE if not a hash
local count = tonumber(v[1])
if not count then
  -- Lost, and its owner says it has stopped: its delay ends, and waiters
  -- sleeping through it are woken (as by a release) if the lock is free.
  if delay_clear(marker, owner) and redis.call('exists', lock) == 0 then
    redis.call('publish', KEYS[2], '0')
  end
  return nil
end
if v[2] then
  -- The owner's field is its read hold of a read-write lock (same owner id).
  return redis.error_reply('WRONGTYPE the key holds a read-write lock')
end

--@include lock_release.lua
if released(redis.call('publish', KEYS[2], '0')) == 1 then
  return 1
end
-- A reservation now holds the free lock for the grace at most: its owner
-- should come at once; if it died, the others are not kept out for long.
-- (Nobody listening: no waiter is asleep; a reservation left by a dead one is
-- cut by the first attempt it turns away.)
local grace = tonumber(ARGV[4])
if reserve and redis.call('pttl', reserve) > grace and
   redis.call('type', reserve).ok == 'string' then
  redis.call('pexpire', reserve, grace)
end
return 2
