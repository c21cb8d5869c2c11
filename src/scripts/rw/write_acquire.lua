-- Acquire the write lock of a read-write lock (Redisson's layout: see
-- read_acquire.lua). The writer's field is <owner id>:write.
--
-- KEYS[1]  the lock (hash)
-- KEYS[2]  the fencing-token counter, redisson_lock_token:{name} (fenced only)
-- KEYS[3]  (optional) the lock-delay marker, dlock_lock_delay:{name}
-- KEYS[4]  (optional) the read holds' lock-delay set, dlock_read_delay:{name}
--          (both dlock's own, given together: honoured whenever given)
-- KEYS[5]  (optional) the failover quarantine's record (dlock's own:
--          include/quarantine.lua): honoured whenever given
-- KEYS[6]  (optional) the writers' intents, dlock_write_intent:{name}
--          (dlock's own, include/intent.lua): given by a writer-first writer
--          that means to wait, with ARGV[6]; KEYS[3..6] in any order, known
--          by their prefixes (include/own_keys.lua)
-- ARGV[1]  lease in ms (the watchdog timeout for watchdog holds)
-- ARGV[2]  the writer's field, <owner id>:write
-- ARGV[3]  owner id (its reader's field)
-- ARGV[4]  "1" to count a fencing token, "0" not to
-- ARGV[5]  (optional) the caller's lock-delay in ms (dlock's own; absent or
--          0: none). A free lock is refused while the marker lives with
--          another writer's field or the set holds a live entry of another
--          reader (either lost its hold unreleased: include/delay.lua),
--          whatever the caller's own delay; with a delay the marker is
--          written with the writer's field, living its TTL + the delay.
-- ARGV[6]  (optional) with KEYS[6]: the intent's life in ms. A busy answer
--          (held, or in a lock-delay) records or renews the caller's intent,
--          living that long; the acquisition removes it. Writers never look
--          at intents (they are preferred, not ordered among themselves).
--
-- Returns nil when acquired (or {token} when fenced). Free: mode "write",
-- the field at 1, the lease as TTL. Reentry (mode write, the caller's field
-- present): one more hold, TTL = current TTL + lease (as Redisson). Otherwise
-- busy: the lock's PTTL in ms (-1: no expiry); or {pttl, 1} when the caller
-- itself holds read holds of this lock: the write lock can never be granted
-- while they last (an upgrade; Redisson would wait forever), so the caller
-- answers at once. {left, 2}: free, in a lock-delay for `left` ms more.
-- A key of another type, or a hash without a valid "mode",
-- answers WRONGTYPE before anything is written.
--@include delay.lua
--@include fence_check.lua
--@include quarantine.lua
--@include own_keys.lua
--@include intent.lua
local lock, field, owner = KEYS[1], ARGV[2], ARGV[3]
local own = own_keys(3)
local intent = own['dlock_write_intent:']
local lease = tonumber(ARGV[1])
local delay = tonumber(ARGV[5] or '0')
local marker, rset = own['dlock_lock_delay:'], own['dlock_read_delay:']
local writes = delay_key(ARGV[5], marker)   -- the marker this caller writes

--@include rw_mode.lua
-- Nothing taken on a new primary in its quarantine, reentries included (see
-- lock/acquire.lua).
local q = quarantine_refusal(own['dlock_quarantine:'])
if q then
  return q
end
local mine = mode == 'write' and redis.call('hget', lock, field)
if mode and not mine then
  local ttl = redis.call('pttl', lock)
  if mode == 'read' and redis.call('hexists', lock, owner) == 1 then
    return {ttl, 1}
  end
  local bad = intent_wrongtype(intent)
  if bad then
    return bad
  end
  intent_write(intent, field, ARGV[6])
  return ttl
end
if mine and not tonumber(mine) then
  return redis.error_reply('WRONGTYPE the write lock\'s field ' .. field .. ' holds no count')
end
if not mode then
  local left = math.max(delay_left(marker, field), rdelay_left(rset, owner))
  if left > 0 then
    local bad = intent_wrongtype(intent)
    if bad then
      return bad
    end
    intent_write(intent, field, ARGV[6])
    return {left, 2}
  end
end

-- Every check before the first write: Redis does not roll a script back.
local bad = fence_wrongtype(ARGV[4], KEYS[2]) or delay_wrongtype(writes) or
            intent_wrongtype(intent)
if bad then
  return bad
end

if mine then
  redis.call('hincrby', lock, field, 1)
  local ttl = redis.call('pttl', lock)
  if ttl < 0 then
    ttl = 0
  end
  redis.call('pexpire', lock, ttl + lease)
else
  redis.call('hset', lock, 'mode', 'write', field, 1)
  redis.call('pexpire', lock, lease)
  intent_clear(intent, field)   -- it waits no more
end
delay_write(writes, field, redis.call('pttl', lock), delay)

if ARGV[4] == '1' then
  local token_key, t = KEYS[2], redis.call('time')
--@include fence_token.lua
end
return nil
