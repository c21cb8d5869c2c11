-- Take one permit of a permit-expirable semaphore (Redisson's
-- RPermitExpirableSemaphore) for a lease, under the caller's permit id.
--
-- KEYS[1]  the semaphore: a string holding the available permits
-- KEYS[2]  the leases, {name}:timeout (sorted set: member = the permit id as
--          its 16 raw bytes; score = expiry in epoch ms, 922337203685477 for
--          a permit without lease)
-- KEYS[3]  the channel, redisson_sc:{name}
-- ARGV[1]  the permit id, 16 bytes (the 32 hex characters the caller sees,
--          decoded, as Redisson stores them)
-- ARGV[2]  the lease in ms (the watchdog timeout for watchdog permits), or
--          -1: no expiry (score NO_EXPIRY, Redisson's leaseTime -1; no
--          lock-delay entry: such a permit never runs out)
-- KEYS[4]  (optional) the set dlock_permit_delay:{name} (dlock's own): its
--          live entries are honoured whenever given, whatever the caller's
--          own delay; written only with a delay (ARGV[3])
-- KEYS[5]  (optional) the failover quarantine's record (dlock's own:
--          include/quarantine.lua): honoured whenever given; KEYS[4..5] in
--          any order, known by their prefixes (include/own_keys.lua)
-- ARGV[3]  (optional) the caller's lock-delay in ms (include/delay.lua's pdelay_*)
--
-- Expired permits go back to the pool first (the new count is published).
-- "Now" is the server's clock (TIME); Redisson's clients use their own.
--
-- Returns nil when the permit is taken. An id that already holds a permit is
-- an attempt retried after its answer was lost: its lease is set again and
-- nil returned, so a retry never takes a second permit. Otherwise the ms
-- until the earliest lease runs out (the waiter sleeps at most that long:
-- nobody publishes when a lease ends), or -1 when no lease will (wait for a
-- message). With a lock-delay, a permit lost unreleased is not given out
-- until its delay ends: the answer is then the ms until it does. A semaphore key that is not a count, or a leases key that is not
-- a sorted set, is refused (WRONGTYPE) before anything is written.
local sem, leases, channel, id = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
local NO_EXPIRY = 922337203685477
--@include own_keys.lua
local own = own_keys(4)
local pset, delay = own['dlock_permit_delay:'], tonumber(ARGV[3] or '0')
local wset = delay > 0 and pset or nil   -- the set this caller writes
--@include delay.lua
--@include quarantine.lua

--@include permit_count.lua
--@include now.lua
local bad = delay_wrongtype(wset, 'zset')
if bad then
  return bad
end
local lease_ms = tonumber(ARGV[2])
if lease_ms < 0 then
  wset = nil
end

-- Expired leases: their permits come back (ZRANGEBYSCORE raises WRONGTYPE
-- for a leases key of another type, before the first write).
-- Nothing taken on a new primary in its quarantine, a retried attempt's
-- permits included (include/quarantine.lua).
local q = quarantine_refusal(own['dlock_quarantine:'])
if q then
  return q
end
--@include permit_sweep.lua

if redis.call('zscore', leases, id) then
  redis.call('zadd', leases, lease_ms < 0 and NO_EXPIRY or now + lease_ms, id)
  rdelay_write(wset, id, ARGV[2], delay)
  return nil
end
local have = tonumber(redis.call('get', sem) or '0')
local left = pdelay_left(pset, leases, have, 1)
if left > 0 then
  return left
end
if have >= 1 then
  redis.call('decr', sem)
  redis.call('zadd', leases, lease_ms < 0 and NO_EXPIRY or now + lease_ms, id)
  rdelay_write(wset, id, ARGV[2], delay)
--@include permit_taken.lua
end
--@include permit_busy.lua
