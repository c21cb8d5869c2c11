-- Release one read hold of a read-write lock (layout: read_acquire.lua). A
-- release retried after a lost reply answers what the first attempt did,
-- through the request's unlock latch (as scripts/lock/release.lua).
--
-- KEYS[1]  the lock (hash)
-- KEYS[2]  the lock's channel, redisson_rwlock:{name}
-- KEYS[3]  this request's latch, redisson_unlock_latch:{name}:<32 hex>
-- KEYS[4]  the owner's timeout prefix, {name}:<owner id>:rwlock_timeout
-- KEYS[5]  the name's key prefix, {name} (every reader's timeout keys are
--          <prefix>:<reader>:rwlock_timeout:<k>)
-- KEYS[6]  (optional) the read holds' lock-delay set, dlock_read_delay:{name}:
--          the owner's entry goes with its last read hold, and with a
--          release that finds it holding none (it lost the lock and says so),
--          so a lock released properly delays no writer
-- ARGV[1]  owner id (the reader's field)
-- ARGV[2]  latch lifetime in ms
-- ARGV[3]  (optional) the caller's lock-delay in ms (dlock's own; unused,
--          kept for the layout)
--
-- The hold's own timeout key (the highest, count) goes with it. Then:
--   - mode write (the writer's own read hold): the writer keeps the lock, its
--     TTL untouched (Redisson may shorten it here; dlock does not), nothing
--     published;
--   - mode read: the lock lives as long as the longest read hold left, any
--     reader's; when none is left (readers gone, or whose holds lapsed) the
--     lock is deleted and "0" published (wakes one waiter: a writer).
--     Where Redis tells expiry times (7.0+) the lock expires with its longest
--     hold to the ms, so the other readers' holds are looked at only until
--     one that expires with the lock is found (Redisson looks at them all on
--     every release).
-- Returns nil when the owner holds no read hold, 0 when it still holds some,
-- and when its last went 1, or 2 when the lock was deleted and some client
-- heard the unlock message. The latch keeps 0 or 1.
local latch, life = KEYS[3], ARGV[2]
--@include unlock_latch.lua
--@include delay.lua
--@include rw_longest.lua
--@include own_keys.lua
local lock, owner = KEYS[1], ARGV[1]
local rset = own_keys(6)['dlock_read_delay:']
local kv = redis.call('hgetall', lock)   -- WRONGTYPE if not a hash
local mode, count, others = nil, nil, false
for i = 1, #kv, 2 do
  local f = kv[i]
  if f == 'mode' then
    mode = kv[i + 1]
  elseif f == owner then
    count = tonumber(kv[i + 1])
  else
    others = true
  end
end
if not mode then
  if #kv > 0 then
    return redis.error_reply('WRONGTYPE the key holds a hash without a read-write lock ' ..
                             'mode (a lock, or somebody\'s data)')
  end
  -- Lost, and its owner says it has stopped: its delay ends, and a writer
  -- sleeping through it is woken.
  if rdelay_clear(rset, owner) then
    redis.call('publish', KEYS[2], '0')
  end
  return nil
end
if mode ~= 'read' and mode ~= 'write' then
  return redis.error_reply('WRONGTYPE the key holds a hash whose mode is not read or write')
end
if not count or count < 1 then
  rdelay_clear(rset, owner)   -- a writer waits for the readers: woken by theirs
  return nil
end

local key = KEYS[4] .. ':' .. count
local mine = count == 1 and 1 or 0
if count == 1 then
  rdelay_clear(rset, owner)
end

if others or count > 1 then
  if count == 1 then
    redis.call('hdel', lock, owner)
  else
    redis.call('hincrby', lock, owner, -1)
  end
  -- Expiry times to the ms where Redis tells them (PEXPIRETIME, 7.0+), else
  -- remaining times (PTTL).
  local gone = redis.pcall('pexpiretime', key)
  local exact = type(gone) == 'number'
  redis.call('del', key)
  if mode == 'write' and others then
    return latched(mine)
  end
  -- Every acquire and renewal gives the lock the expiry of the hold that
  -- raised it, exactly (read_acquire.lua): while a hold left expires with
  -- the lock, nothing changes; a hold that expires before it was not the
  -- longest.
  local lexp = exact and redis.call('pexpiretime', lock)
  if exact and gone < lexp then
    return latched(mine)
  end
  -- The longest read hold left, whoever's, if any is alive (the latest
  -- readers, last in the hash, first).
  local longest = longest_hold(exact and 'pexpiretime' or 'pttl', kv, KEYS[5], owner,
                               exact and lexp)
  if not longest then   -- a hold left expires with the lock
    return latched(mine)
  end
  if longest > 0 then
    redis.call(exact and 'pexpireat' or 'pexpire', lock, longest)
    return latched(mine)
  end
end

-- No live read hold is left: the lock goes (with any field whose holds
-- lapsed), and a waiting writer is woken.
redis.call('del', lock, key)
return released(redis.call('publish', KEYS[2], '0'))
