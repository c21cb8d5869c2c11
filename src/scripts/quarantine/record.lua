-- Arm, or start, the failover quarantine recorded on the server (dlock's
-- own; include/quarantine.lua): a client with the quarantine on arms the
-- record of each slot it acquires in (so that a replica promoted later
-- holds it too), and starts it on a new primary it sees, so that every dlock
-- client's acquisitions there honour it, clients without the setting and
-- clients started after the switch included.
--
-- KEYS[i]  the records, dlock_quarantine:{<tag>} (the tag in a slot's
--          cluster slot; one at a time on a cluster, any number on one
--          primary)
-- ARGV[1]  the quarantine in ms
-- ARGV[2]  how long an armed record lives in ms (a client re-arms it before)
-- ARGV[3]  "1": this server is a new primary: the quarantine starts now;
--          "0": arm only
--
-- A record keeps the longest quarantine any client asked for, and the
-- replication id of this server. Armed on a server whose id is not the
-- record's (a replica promoted, a restart), the quarantine starts now too.
-- A key of another type (somebody's data) is left as it is. Returns the ms
-- left of the quarantine running on the first key (0: none).
local tm = redis.call('time')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
local cur = string.match(redis.call('info', 'replication'), 'master_replid:(%x+)') or '0'
local first = nil
for i = 1, #KEYS do
  local key = KEYS[i]
  local t = redis.call('type', key).ok
  if t == 'none' or t == 'string' then
    local ms = tonumber(ARGV[1])
    local till = 0
    local rid, ms0, till0 = string.match(redis.call('get', key) or '', '^(%x+):(%d+):(%d+)$')
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
    local life = math.max(tonumber(ARGV[2]), till - now, redis.call('pttl', key))
    redis.call('set', key, cur .. ':' .. ms .. ':' .. till, 'px', life)
    first = first or math.max(till - now, 0)
  end
end
return first or 0
