-- Give a permit back by its id (Redisson's tryRelease of one id).
--
-- KEYS[1]  the semaphore: a string holding the available permits
-- KEYS[2]  the leases, {name}:timeout (see acquire.lua)
-- KEYS[3]  the channel, redisson_sc:{name}
-- ARGV[1]  the permit id, 16 bytes
-- ARGV[2]  (optional) "1": forced by somebody else than its holder (an
--          operator): its lock-delay entry stays, as for a lock forced open
-- KEYS[4]  (optional) the set dlock_permit_delay:{name} (dlock's own), whose
--          entry for the permit the release removes, also when the permit's
--          lease had run out: its holder says it has stopped (include/delay.lua)
--
-- Expired permits go back to the pool first (the new count is published).
-- Returns {1, heard} when the permit was held and is back (the new count is
-- published; heard = clients that received it), {0, 0} when no permit has
-- this id (released already, never acquired), {2, 0} when its lease had run
-- out (it is back in the pool by expiry, not by this release). Redisson's
-- tryRelease answers false for both. Keys of other types are refused
-- (WRONGTYPE) before anything is written.
local sem, leases, channel, id = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
local pset = KEYS[4]
if ARGV[2] == '1' then
  pset = nil   -- its holder did not let go: its delay runs on
end
--@include delay.lua

--@include permit_count.lua
--@include now.lua
local bad = delay_wrongtype(pset, 'zset')
if bad then
  return bad
end

local score = redis.call('zscore', leases, id)
--@include permit_sweep.lua
if not score or tonumber(score) <= now then
  -- Lost (or released already), and its holder says it has stopped: its
  -- delay ends, and waiters are told the count, as by a release.
  if rdelay_clear(pset, id) then
    redis.call('publish', channel, redis.call('get', sem) or '0')
  end
  return {score and 2 or 0, 0}
end
redis.call('zrem', leases, id)
rdelay_clear(pset, id)
local count = redis.call('incr', sem)
local heard = 0
if count > 0 then
  heard = redis.call('publish', channel, count)
end
return {1, heard}
