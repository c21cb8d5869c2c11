-- Set a permit-expirable semaphore's permits: only when it has none set yet
-- (Redisson's trySetPermits: the available count), or the total
-- (Redisson's setPermits: available + held becomes ARGV[1], so the available
-- count is what is left after the permits held, negative when more are held).
--
-- KEYS[1]  the semaphore: a string holding the available permits
-- KEYS[2]  the channel, redisson_sc:{name}
-- KEYS[3]  the leases, {name}:timeout (see acquire.lua)
-- ARGV[1]  the permits (0..2^31-1, checked by the caller)
-- ARGV[2]  "1": only when the semaphore key does not exist; "0": always
--
-- Expired permits go back to the pool first. Returns 1 when set, 0 when it
-- existed already (ARGV[2] = "1"). A positive count is published (what
-- Redisson publishes). Keys of other types are refused (WRONGTYPE) before
-- anything is written.
local sem, channel, leases = KEYS[1], KEYS[2], KEYS[3]

--@include permit_count.lua
local held = redis.call('zcard', leases)   -- WRONGTYPE for another type, before any write
if v and ARGV[2] == '1' then
  return 0
end
--@include now.lua
local gone = redis.call('zrangebyscore', leases, 0, now)
if #gone > 0 then
  for i = 1, #gone, 1000 do
    redis.call('zrem', leases, unpack(gone, i, math.min(i + 999, #gone)))
  end
  redis.call('incrby', sem, #gone)
  held = held - #gone
end
local want = tonumber(ARGV[1])
if not v or ARGV[2] == '1' then
  redis.call('set', sem, want)
else
  local have = tonumber(redis.call('get', sem))
  if have + held ~= want then
    redis.call('incrby', sem, want - have - held)
  end
end
if want > 0 then
  redis.call('publish', channel, want)
end
return 1
