-- Acquire a reentrant lock in Redisson's RLock layout: a hash whose field
-- <owner id> holds the owner's hold count, with the lease as the key's TTL.
--
-- KEYS[1]  the lock (hash)
-- KEYS[2]  the fencing-token counter, redisson_lock_token:{name} (fenced only)
-- ARGV[1]  lease in ms (the watchdog timeout for watchdog locks)
-- ARGV[2]  owner id, "<client uuid>:<thread id>"
-- ARGV[3]  "1" to count a fencing token, "0" not to
--
-- Returns nil when acquired (or {token} when fenced); otherwise the holder's
-- remaining TTL in ms (-1: no expiry), which bounds how long a waiter sleeps.
-- A key of another type raises WRONGTYPE at HEXISTS, before anything is written.
local lock, owner = KEYS[1], ARGV[2]

if redis.call('exists', lock) == 1 and redis.call('hexists', lock, owner) == 0 then
  return redis.call('pttl', lock)
end

-- Everything that can fail is checked before the first write: Redis does not
-- roll a script back, and an error after HINCRBY would leave a hold nobody
-- knows about.
if ARGV[3] == '1' then
  local t = redis.call('type', KEYS[2]).ok
  if t ~= 'none' and (t ~= 'string' or not tonumber(redis.call('get', KEYS[2]))) then
    return redis.error_reply('WRONGTYPE fencing token key ' .. KEYS[2] .. ' holds no number')
  end
end

-- Free, or held by this owner already (reentry): count one more hold.
redis.call('hincrby', lock, owner, 1)
redis.call('pexpire', lock, ARGV[1])

if ARGV[3] == '1' then
  -- Same script as the acquisition, so token order is acquisition order.
  -- INCR as Redisson does; but never below the server's clock in microseconds,
  -- so tokens keep increasing when the counter is lost with a restart without
  -- persistence or a failover (2^53 is not reached before the year 2255).
  local token = redis.call('incr', KEYS[2])
  local t = redis.call('time')
  local floor = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if token < floor then
    token = floor
    redis.call('set', KEYS[2], token)
  end
  return {token}
end
return nil
