-- Acquire a reentrant lock in Redisson's RLock layout: a hash whose field
-- <owner id> holds the owner's hold count, with the lease as the key's TTL.
--
-- KEYS[1]  the lock (hash)
-- KEYS[2]  the fencing-token counter, redisson_lock_token:{name} (fenced only)
-- KEYS[3]  (optional) the lock-delay marker, dlock_lock_delay:{name} (dlock's
--          own): honoured whenever given, written only with a delay (ARGV[6])
-- KEYS[4]  (optional) the failover quarantine's record, dlock_quarantine:{<tag>}
--          (dlock's own: include/quarantine.lua): honoured whenever given
-- KEYS[5]  (optional) the reservation, dlock_lock_next:{name} (dlock's own: a
--          string holding the owner id of a long waiter that goes next).
--          Without it the caller neither reserves nor honours reservations
--          (as Redisson; a client with the priority off). KEYS[3..5] are
--          dlock's own, in any order, each known by its prefix
--          (include/own_keys.lua): an ACL that allows Redisson's keys only
--          refuses them, and the client then goes on without.
-- ARGV[1]  lease in ms (the watchdog timeout for watchdog locks)
-- ARGV[2]  owner id, "<client uuid>:<thread id>"
-- ARGV[3]  "1" to count a fencing token, "0" not to
-- ARGV[4]  "1" when the caller has waited long enough to reserve the next turn
-- ARGV[5]  grace in ms: how long a reservation holds a free lock for its owner
-- ARGV[6]  (optional) this caller's lock-delay in ms (dlock's own; absent or
--          0: none). The marker, dlock_lock_delay:{name}, a string holding the
--          holder's owner id, lives the lease + the delay: written with every
--          acquisition and renewal by a holder with a delay, deleted by a
--          proper release. While it lives with another owner's id, the free
--          lock is refused, whatever the caller's own delay: its holder lost
--          it without releasing (died, paused, cut off), and may not know yet.
-- ARGV[7]  (optional) "1": a non-reentrant lock (Redisson's
--          RedissonNonReentrantLock): the owner's acquisition while it holds
--          the lock is refused, error "DLOCKREENTRY", before anything is
--          written (Redisson answers its own error there)
--
-- Returns nil when acquired (or {token} when fenced). When not acquired:
--   ttl         held by another owner: its remaining TTL in ms (-1: no
--               expiry), which bounds how long a waiter sleeps;
--   {ttl, 1}    the same, and the next turn is now reserved for the caller;
--   {left, 0}   the lock is free but reserved for another waiter, for at most
--               `left` more ms.
-- A lock key of another type raises WRONGTYPE at HEXISTS, and a hash that is
-- not a lock (a field not of the owner form "<id>:<n>", or a count that is not
-- a number: somebody's data, or a read-write lock's "mode") answers a
-- WRONGTYPE error, both before anything is written. A reservation key of
-- another type is somebody's data: it counts as no reservation and is never
-- written.
--@include delay.lua
--@include fence_check.lua
--@include lock_shape.lua
--@include quarantine.lua
--@include own_keys.lua
local lock, owner = KEYS[1], ARGV[2]
if ARGV[7] == '1' and redis.call('hexists', lock, owner) == 1 then
  return redis.error_reply('DLOCKREENTRY the caller holds this non-reentrant lock already')
end
local own = own_keys(3)
local marker, reserve = own['dlock_lock_delay:'], own['dlock_lock_next:']
local grace = tonumber(ARGV[5])
local delay = tonumber(ARGV[6] or '0')
local writes = delay > 0 and marker or nil   -- the marker this caller writes
local mine = false

-- The reservation's owner id; nil when there is none (or no key was given);
-- false when the key holds another type.
local function reserved_for()
  if not reserve then
    return nil
  end
  local r = redis.pcall('get', reserve)
  if type(r) == 'string' then
    return r
  elseif type(r) == 'table' then
    return false
  end
  return nil
end

-- On a new primary that may lack its predecessor's last grants (and
-- releases: a hold there may be a ghost, even the caller's own), nothing is
-- taken, not even a reentry, until its quarantine ends.
local q = quarantine_refusal(own['dlock_quarantine:'])
if q then
  return q
end

if redis.call('exists', lock) == 1 then
  local v = redis.call('hmget', lock, owner, 'mode')
  if not v[1] then
    -- Only on this path: a held lock has one field, so this costs little,
    -- and the uncontended acquire pays nothing.
    local what = not_a_lock(lock)
    if what then
      return redis.error_reply('WRONGTYPE the key holds ' .. what)
    end
    local ttl = redis.call('pttl', lock)
    if ARGV[4] == '1' and reserve then
      local r = reserved_for()
      if r == nil or r == owner then
        -- Outlives the holder's lease by the grace; a release or the next
        -- attempt on the free lock cuts it to the grace.
        local px = grace
        if ttl > 0 then
          px = ttl + grace
        end
        redis.call('set', reserve, owner, 'px', px)
        return {ttl, 1}
      end
    end
    return ttl
  elseif v[2] then
    -- The owner's field is its read hold of a read-write lock (same owner id).
    return redis.error_reply('WRONGTYPE the key holds a read-write lock')
  end
else
  -- Free, but its last holder lost it without a release: wait out the delay.
  local left = delay_left(marker, owner)
  if left > 0 then
    return {left, 2}
  end
  local r = reserved_for()
  if r and r ~= owner then
    -- Free, but another waiter goes next. Released without the cut (by
    -- Redisson, or the lease ran out): the grace starts now.
    local left = redis.call('pttl', reserve)
    if left > grace or left < 0 then
      redis.call('pexpire', reserve, grace)
      left = grace
    end
    return {left, 0}
  end
  mine = r == owner
end

-- Everything that can fail is checked before the first write: Redis does not
-- roll a script back, and an error after HINCRBY would leave a hold nobody
-- knows about.
local bad = fence_wrongtype(ARGV[3], KEYS[2]) or delay_wrongtype(writes)
if bad then
  return bad
end

-- Free, or held by this owner already (reentry): count one more hold.
redis.call('hincrby', lock, owner, 1)
redis.call('pexpire', lock, ARGV[1])
delay_write(writes, owner, ARGV[1], delay)
if mine then
  redis.call('del', reserve)   -- the reserved turn is taken
end

if ARGV[3] == '1' then
  local token_key, t = KEYS[2], redis.call('time')
--@include fence_token.lua
end
return nil
