-- Give several permits back in one script, all or nothing (Redisson's
-- tryRelease(List) / release(List)).
--
-- KEYS[1]  the semaphore: a string holding the available permits
-- KEYS[2]  the leases, {name}:timeout (see acquire.lua)
-- KEYS[3]  the channel, redisson_sc:{name}
-- ARGV[1]  the permit ids, 16 bytes each, one after the other (n >= 1,
--          no two alike: the caller checks)
-- KEYS[4]  (optional) the set dlock_permit_delay:{name} (dlock's own), whose
--          entries for the permits a release removes
--
-- Every id is checked before anything is written: one unknown (released
-- already, never acquired) or expired id and nothing is released, and the
-- answer is {0, 0, i, why}: i the first such id's place (1-based), why 0
-- unknown, 2 expired. Else expired permits of others go back to the pool
-- (their count published, as every script does), the n permits are given
-- back, the number released (n) is published, as Redisson's list release
-- does (its waiters wake that many of themselves), and the answer is
-- {n, heard}: heard = clients that received it. Keys of other types are
-- refused (WRONGTYPE) before anything is written.
local sem, leases, channel = KEYS[1], KEYS[2], KEYS[3]
local raw = ARGV[1]
local pset = KEYS[4]
--@include delay.lua
--@include permit_ids.lua
--@include permit_count.lua
--@include now.lua
local bad = delay_wrongtype(pset, 'zset')
if bad then
  return bad
end

for i = 1, n do
  local score = redis.call('zscore', leases, ids[i])
  if not score then
    return {0, 0, i, 0}
  end
  if tonumber(score) <= now then
    return {0, 0, i, 2}
  end
end

--@include permit_sweep.lua
for i = 1, n, 1000 do
  redis.call('zrem', leases, unpack(ids, i, math.min(i + 999, n)))
end
for i = 1, n do
  rdelay_clear(pset, ids[i])
end
redis.call('incrby', sem, n)
local heard = redis.call('publish', channel, n)
return {n, heard}
