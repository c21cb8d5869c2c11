-- Renew a batch of watchdog-held read holds in one call (all keys in one
-- slot): every read hold of the owner (each its timeout key) and the lock.
--
-- KEYS[2i-1]  a read-write lock (hash)
-- KEYS[2i]    the owner's timeout prefix, {name}:<owner id>:rwlock_timeout
-- ARGV[1]     the watchdog timeout in ms
-- ARGV[i+1]   the owner id (its reader's field) of hold i
-- With a lock-delay, each hold has three keys, the lock, the prefix and the
-- read holds' lock-delay set dlock_read_delay:{name}, and two arguments, the
-- owner id and the delay in ms: its entry in the set is renewed to the
-- timeout + the delay (include/delay.lua). A batch is of one form: three
-- keys for two arguments per hold, or two for one (the counts tell which).
--
-- Returns one integer per hold: 1 renewed, 0 the owner holds no read hold
-- any more (the client reports it lost). A key replaced by another type
-- counts as lost for its own entry (pcall) rather than failing the batch. The
-- lock's TTL is raised to the timeout, never lowered (another reader may hold
-- a longer lease; Redisson sets it to the timeout); to the ms of the owner's
-- hold 1 where Redis tells expiry times (7.0+).
--
-- With client tracking on, no KEYS: ARGV[2] = the number of keys, ARGV[3..]
-- the keys, then the per-hold arguments (include/renew_keys.lua says why).
--@include renew_keys.lua
--@include delay.lua
local lease = tonumber(ARGV[1])
local nk, na = 2, 1
if #keys > 0 and #keys ~= 2 * (#ARGV - a) then
  nk, na = 3, 2
end
return renewed(nk, function(i)
  local lock, prefix = keys[nk * (i - 1) + 1], keys[nk * (i - 1) + 2]
  local owner = ARGV[a + na * (i - 1) + 1]
  local n = redis.pcall('hget', lock, owner)
  if type(n) ~= 'string' or not tonumber(n) then
    return false
  end
  for k = tonumber(n), 1, -1 do
    redis.call('pexpire', prefix .. ':' .. k, lease)
  end
  -- Hold 1, renewed last, expires last: the lock gets its expiry to the ms
  -- where Redis tells it (7.0+; see read_acquire.lua), never lower.
  local at = redis.pcall('pexpiretime', prefix .. ':1')
  if type(at) == 'number' and at > 0 then
    redis.call('pexpireat', lock, at, 'GT')
  elseif redis.call('pttl', lock) < lease then
    redis.call('pexpire', lock, lease)
  end
  if nk == 3 and not delay_wrongtype(keys[nk * i], 'zset') then
    rdelay_write(keys[nk * i], owner, lease, tonumber(ARGV[a + na * i]))
  end
  return true
end)
