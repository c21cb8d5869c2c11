-- Take n permits of a permit-expirable semaphore at once, all or none
-- (Redisson's acquire(permits, lease) / tryAcquire(permits, wait, lease)),
-- under the caller's n permit ids, each with the same lease.
--
-- KEYS[1]  the semaphore: a string holding the available permits
-- KEYS[2]  the leases, {name}:timeout (see acquire.lua)
-- KEYS[3]  the channel, redisson_sc:{name}
-- ARGV[1]  the lease in ms (the watchdog timeout for watchdog permits), or
--          -1: no expiry (as acquire.lua's)
-- ARGV[2]  the n permit ids, 16 bytes each, one after the other (n >= 1)
-- KEYS[4]  (optional) the set dlock_permit_delay:{name} (dlock's own): its
--          live entries are honoured whenever given, whatever the caller's
--          own delay; written only with a delay (ARGV[3])
-- KEYS[5]  (optional) the failover quarantine's record (dlock's own:
--          include/quarantine.lua): honoured whenever given; KEYS[4..5] in
--          any order, known by their prefixes (include/own_keys.lua)
-- ARGV[3]  (optional) the caller's lock-delay in ms (see acquire.lua)
--
-- Expired permits go back to the pool first (the new count is published).
-- Returns nil when the n permits are taken. Ids that already hold permits
-- are an attempt retried after its answer was lost (the permits are taken
-- all together): their leases are set again and nil returned. Otherwise, as
-- acquire.lua, the ms until the earliest lease runs out, or -1 when no lease
-- will. Refused before anything is written: a semaphore key that is not a
-- count or a leases key of another type (WRONGTYPE), and n larger than the
-- semaphore's total, available + held (DLOCKOVERTOTAL, core.h's word for
-- "more than there is in all": it could never be served as it stands); a
-- missing semaphore has no permits yet, and is waited for.
local sem, leases, channel = KEYS[1], KEYS[2], KEYS[3]
local NO_EXPIRY = 922337203685477
--@include own_keys.lua
local own = own_keys(4)
local pset, delay = own['dlock_permit_delay:'], tonumber(ARGV[3] or '0')
local wset = delay > 0 and pset or nil   -- the set this caller writes
--@include delay.lua
--@include quarantine.lua
local raw = ARGV[2]
--@include permit_ids.lua

--@include permit_count.lua
local held = redis.call('zcard', leases)   -- WRONGTYPE before any write
if v and n > tonumber(v) + held then
  return redis.error_reply('DLOCKOVERTOTAL ' .. n .. ' permits asked of a semaphore of ' ..
                           (tonumber(v) + held) .. ' in all')
end
--@include now.lua
local bad = delay_wrongtype(wset, 'zset')
if bad then
  return bad
end

-- Nothing taken on a new primary in its quarantine, a retried attempt's
-- permits included (include/quarantine.lua).
local q = quarantine_refusal(own['dlock_quarantine:'])
if q then
  return q
end
--@include permit_sweep.lua

local lease_ms = tonumber(ARGV[1])
local until_ms = now + lease_ms
if lease_ms < 0 then
  until_ms, wset = NO_EXPIRY, nil
end
if redis.call('zscore', leases, ids[1]) then
  for i = 1, n do
    if redis.call('zscore', leases, ids[i]) then
      redis.call('zadd', leases, until_ms, ids[i])
      rdelay_write(wset, ids[i], ARGV[1], delay)
    end
  end
  return nil
end
local have = tonumber(redis.call('get', sem) or '0')
local left = pdelay_left(pset, leases, have, n)
if left > 0 then
  return left
end
if have >= n then
  redis.call('decrby', sem, n)
  for i = 1, n do
    redis.call('zadd', leases, until_ms, ids[i])
    rdelay_write(wset, ids[i], ARGV[1], delay)
  end
--@include permit_taken.lua
end
--@include permit_busy.lua
