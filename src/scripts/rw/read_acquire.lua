-- Acquire the read lock of a read-write lock in Redisson's RReadWriteLock
-- layout: a hash whose field "mode" is "read" or "write"; each reader's field
-- <owner id> holds its read hold count; the writer's field <owner id>:write
-- its write hold count. Each read hold k = 1..count has its own string key
-- <timeout prefix>:k with the hold's lease as TTL; the hash lives as long as
-- the longest of them.
--
-- KEYS[1]  the lock (hash)
-- KEYS[2]  the owner's timeout prefix, {name}:<owner id>:rwlock_timeout
-- KEYS[3]  the fencing-token counter, redisson_lock_token:{name} (fenced only)
-- ARGV[1]  lease in ms (the watchdog timeout for watchdog holds)
-- ARGV[2]  owner id (the reader's field)
-- ARGV[3]  the owner's writer field, <owner id>:write
-- KEYS[4]  (optional) the lock-delay marker, dlock_lock_delay:{name}
-- KEYS[5]  (optional) the read holds' lock-delay set, dlock_read_delay:{name}
--          (both dlock's own, given together: the marker honoured whenever
--          given, the set written only with a delay)
-- KEYS[6]  (optional) the failover quarantine's record (dlock's own:
--          include/quarantine.lua): honoured whenever given
-- KEYS[7]  (optional) the writers' intents, dlock_write_intent:{name}
--          (dlock's own, include/intent.lua): given by a writer-first reader;
--          KEYS[4..7] in any order, known by their prefixes
--          (include/own_keys.lua)
-- ARGV[4]  "1" to count a fencing token, "0" not to
-- ARGV[5]  (optional) the caller's lock-delay in ms (dlock's own; absent or
--          0: none). A free lock whose marker lives with another writer's
--          field is refused (its writer lost it unreleased), whatever the
--          caller's own delay; with a delay the reader's entry in the set
--          (include/delay.lua) ends no sooner than this hold + the delay.
--
-- Returns nil when acquired (or {token} when fenced), else the lock's PTTL in
-- ms (-1: no expiry): a writer holds it; or {left, 2}: free, in the lock-delay
-- of a writer that lost it, for `left` ms more; or {left, 3}: free or
-- read-held, but another writer waits (KEYS[7] given: writer-first) and its
-- intent lives `left` ms more unless renewed. Without KEYS[7] readers join
-- whenever the mode is read (Redisson's rule: no writer preference); with
-- it, a caller that holds no read hold queues behind waiting writers, while
-- one that holds some re-enters. The writer itself may take the read lock.
-- A key of another type, or a hash without a valid "mode" (a reentrant lock,
-- or somebody's data), answers WRONGTYPE before anything is written.
--@include delay.lua
--@include fence_check.lua
--@include quarantine.lua
--@include own_keys.lua
--@include intent.lua
local lock, prefix, owner = KEYS[1], KEYS[2], ARGV[2]
local own = own_keys(4)
local intent = own['dlock_write_intent:']
local lease = tonumber(ARGV[1])
local delay = tonumber(ARGV[5] or '0')
local marker = own['dlock_lock_delay:']
local rset = delay_key(ARGV[5], own['dlock_read_delay:'])   -- written with a delay only

--@include rw_mode.lua
if not mode then
  local left = delay_left(marker, ARGV[3])
  if left > 0 then
    return {left, 2}
  end
elseif mode == 'write' and redis.call('hexists', lock, ARGV[3]) == 0 then
  return redis.call('pttl', lock)
end
-- Writer-first: a new reader (none of its read holds here; not the writer,
-- whose mode write was let through above) waits behind a waiting writer.
if intent and mode ~= 'write' and redis.call('hexists', lock, owner) == 0 then
  local bad = intent_wrongtype(intent)
  if bad then
    return bad
  end
  local left = intent_left(intent, ARGV[3])
  if left > 0 then
    return {left, 3}
  end
end

-- Every check before the first write: Redis does not roll a script back.
-- Nothing taken on a new primary in its quarantine, reentries included (see
-- lock/acquire.lua).
local bad = fence_wrongtype(ARGV[4], KEYS[3]) or delay_wrongtype(rset, 'zset') or
            quarantine_refusal(own['dlock_quarantine:'])
if bad then
  return bad
end

local key
if not mode then
  redis.call('hset', lock, 'mode', 'read', owner, 1)
  key = prefix .. ':1'
else
  -- A field that holds no count fails here, before any write.
  local n = redis.pcall('hincrby', lock, owner, 1)
  if type(n) ~= 'number' then
    return redis.error_reply('WRONGTYPE the read lock\'s field ' .. owner .. ' holds no count')
  end
  key = prefix .. ':' .. n
end
redis.call('set', key, 1, 'px', lease)
rdelay_write(rset, owner, lease, delay)
-- The lock lives as long as its longest hold: raised to this one's expiry,
-- never lowered. Where Redis tells expiry times (7.0+) the lock gets this
-- hold's to the ms, so that a release can tell whether the hold that goes is
-- the longest (read_release.lua).
local at = redis.pcall('pexpiretime', key)
if type(at) == 'number' and at > 0 then
  if mode then
    redis.call('pexpireat', lock, at, 'GT')
  else
    redis.call('pexpireat', lock, at)
  end
elseif not mode or redis.call('pttl', lock) < lease then
  redis.call('pexpire', lock, lease)
end

if ARGV[4] == '1' then
  local token_key, t = KEYS[3], redis.call('time')
--@include fence_token.lua
end
return nil
