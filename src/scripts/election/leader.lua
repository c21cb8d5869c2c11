-- Who leads an election (dlock's own), read atomically.
--
-- KEYS[1]  the election's lock
-- KEYS[2]  its record (announce.lua)
--
-- Returns {term, owner, who, pttl}: the recorded leader when it still holds
-- the lock; else {'0', '', '', pttl}: nobody leads (or a new leader has not
-- announced itself yet). pttl: the lock's PTTL (-2 when free), so that an
-- observer sleeps no longer than the leader could live without renewing.
local pttl = redis.call('pttl', KEYS[1])
local r = redis.call('hmget', KEYS[2], 'term', 'owner', 'who')
if pttl ~= -2 and r[1] and r[2] and redis.call('hexists', KEYS[1], r[2]) == 1 then
  return {r[1], r[2], r[3] or '', pttl}
end
return {'0', '', '', pttl}
