-- Release one hold of a fair lock, and wake the head of the queue only (its
-- own channel). A release retried after a lost reply answers what the first
-- attempt did, through the request's latch (as the reentrant lock's).
--
-- KEYS[1]  the lock (hash)
-- KEYS[2]  the queue, redisson_lock_queue:{name}
-- KEYS[3]  the deadlines, redisson_lock_timeout:{name}
-- KEYS[4]  the channels' prefix, redisson_lock__channel:{name} (a waiter
--          listens on prefix .. ':' .. its owner id)
-- KEYS[5]  this request's latch, redisson_unlock_latch:{name}:<32 hex>
-- KEYS[6]  (optional) the lock-delay marker, dlock_lock_delay:{name} (see
--          lock/release.lua): the owner's is deleted by its last release, and
--          by a release that finds it holding nothing (it lost the lock)
-- ARGV[1]  owner id
-- ARGV[2]  lease in ms to set while holds remain; "0" keeps the current TTL
-- ARGV[3]  latch lifetime in ms
-- ARGV[4]  the grace in ms (the configured fair wait timeout): the woken
--          head's deadline is cut to now + grace at most (its turn starts
--          now; see acquire.lua)
-- ARGV[5]  (optional) the caller's lock-delay in ms (see acquire.lua): a
--          reentry's release renews the marker with the lease
--
-- Returns 0 when holds remain, nil when the owner holds nothing, and when the
-- last hold went 2 if the head of the queue heard its wake-up, 1 if not.
-- A read-write lock's hash (a "mode" field; the owner's field is then its
-- read hold) answers WRONGTYPE and is left as it is.
local latch, life = KEYS[5], ARGV[3]
--@include unlock_latch.lua
--@include delay.lua
--@include fair_wake.lua
--@include own_keys.lua
local lock, queue, deadlines, owner = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
local delay = tonumber(ARGV[5] or '0')
local marker = own_keys(6)['dlock_lock_delay:']
--@include now.lua

-- The head's turn starts: it is woken (include/fair_wake.lua).
local function wake()
  return wake_head(queue, deadlines, KEYS[4], now, tonumber(ARGV[4]))
end

local v = redis.call('hmget', lock, owner, 'mode')   -- WRONGTYPE if not a hash
local count = tonumber(v[1])
if not count then
  if redis.call('exists', lock) == 0 then
    delay_clear(marker, owner)   -- it lost the lock and says so: no delay on its account
    wake()   -- the lock lapsed unseen: let the head try now
  end
  return nil
end
if v[2] then
  -- The owner's field is its read hold of a read-write lock (same owner id).
  return redis.error_reply('WRONGTYPE the key holds a read-write lock')
end
--@include lock_release.lua
latched(1)   -- before the wake-up, which may raise WRONGTYPE (a queue of another type)
if wake() > 0 then
  return 2
end
return 1
