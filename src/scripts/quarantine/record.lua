-- Record a failover quarantine on a new primary (dlock's own;
-- include/quarantine.lua): written by a client with the quarantine on that
-- sees the switch, so that every dlock client's acquisitions on that shard
-- honour it, clients that started after the switch included.
--
-- KEYS[1]  the record, dlock_quarantine:{<tag>} (one per slot the primary
--          took over on a cluster; dlock_quarantine:{*} on one primary)
-- ARGV[1]  the quarantine in ms
--
-- The record lives at least ARGV[1] ms from now: a longer one already there
-- (another client's) is kept. A key of another type (somebody's data) is
-- left as it is. Returns the ms it lives now (0: not written).
local ms = tonumber(ARGV[1])
local t = redis.call('type', KEYS[1]).ok
if t ~= 'none' and t ~= 'string' then
  return 0
end
local left = redis.call('pttl', KEYS[1])
if left >= ms then
  return left
end
redis.call('set', KEYS[1], ARGV[1], 'px', ms)
return ms
