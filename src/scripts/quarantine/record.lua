-- Arm, or start, the failover quarantine recorded on the server (dlock's
-- own; include/quarantine.lua): a client with the quarantine on arms the
-- record of each slot it acquires in (so that a replica promoted later
-- holds it too), and starts it on a new primary it sees, so that every dlock
-- client's acquisitions there honour it, clients without the setting and
-- clients started after the switch included.
--
-- KEYS[1]  the record, dlock_quarantine:{<tag>} (the tag in the slot's
--          cluster slot; dlock_quarantine:{*} on one primary)
-- ARGV[1]  the quarantine in ms
-- ARGV[2]  how long the armed record lives in ms (a client re-arms it before)
-- ARGV[3]  "1": this server is a new primary: the quarantine starts now;
--          "0": arm only
--
-- The record keeps the longest quarantine any client asked for, and the
-- replication id of this server. Armed on a server whose id is not the
-- record's (a replica promoted, a restart), the quarantine starts now too.
-- A key of another type (somebody's data) is left as it is. Returns the ms
-- left of the quarantine running (0: none).
local t = redis.call('type', KEYS[1]).ok
if t ~= 'none' and t ~= 'string' then
  return 0
end
local tm = redis.call('time')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
local cur = string.match(redis.call('info', 'replication'), 'master_replid:(%x+)') or '0'
local ms = tonumber(ARGV[1])
local till = 0
local v = redis.call('get', KEYS[1])
local rid, ms0, till0 = string.match(v or '', '^(%x+):(%d+):(%d+)$')
if rid then
  ms = math.max(ms, tonumber(ms0))
  till = tonumber(till0)
  if rid ~= cur then
    till = math.max(till, now + ms)
  end
end
if ARGV[3] == '1' then
  till = math.max(till, now + ms)
end
if till < now then
  till = 0
end
local life = math.max(tonumber(ARGV[2]), till - now, redis.call('pttl', KEYS[1]))
redis.call('set', KEYS[1], cur .. ':' .. ms .. ':' .. till, 'px', life)
return math.max(till - now, 0)
