-- Acquire a fair lock in Redisson's RFairLock layout: the lock is a
-- reentrant lock's hash; waiters queue in arrival order, each with a deadline
-- by which it should have taken its turn. A waiter whose deadline passes while
-- it is at the head of the queue is dropped (it died, or gave up unseen).
--
-- KEYS[1]  the lock (hash: field <owner id> = hold count)
-- KEYS[2]  the queue, redisson_lock_queue:{name} (list of owner ids)
-- KEYS[3]  the deadlines, redisson_lock_timeout:{name} (sorted set: owner id,
--          score = absolute ms)
-- KEYS[4]  the fencing-token counter, redisson_lock_token:{name} (fenced only)
-- KEYS[5]  (optional) the lock-delay marker, dlock_lock_delay:{name} (dlock's
--          own, as the reentrant lock's: see lock/acquire.lua): honoured
--          whenever given, written only with a delay (ARGV[7])
-- KEYS[6]  (optional) the failover quarantine's record (dlock's own:
--          include/quarantine.lua): honoured whenever given; KEYS[5..6] in
--          any order, known by their prefixes (include/own_keys.lua)
-- ARGV[1]  lease in ms (the watchdog timeout for watchdog locks)
-- ARGV[2]  owner id
-- ARGV[3]  this waiter's slot in ms: how long a turn may wait for it (Redisson's
--          fairLockWaitTimeout, or the caller's wait when it gave one)
-- ARGV[4]  "1" to count a fencing token, "0" not to
-- ARGV[5]  "1" when the caller waits: a busy answer puts it in the queue (or
--          keeps it there); "0" for a single try, which never queues
-- ARGV[6]  the grace a head is owed once the lock is free, in ms: the client's
--          configured fair wait timeout, never the caller's own wait
-- ARGV[7]  (optional) the caller's lock-delay in ms (absent or 0: none).
--          While the marker lives with another owner's id (whatever the
--          caller's own delay) and the lock is free, the lock is
--          treated as held by that lost holder until the marker ends: nobody
--          takes it, waiters queue (in order, as for a held lock) and the
--          head's turn starts when the delay ends.
-- ARGV[8]  (optional) "1": a non-reentrant fair lock (Redisson's
--          RedissonNonReentrantFairLock): the owner's acquisition while it
--          holds the lock is refused, error "DLOCKREENTRY", before anything
--          is written
--
-- Returns nil when acquired (or {token} when fenced). When not acquired,
-- {sleep, why}: why 0 = held by another owner, 1 = free but an earlier waiter
-- goes first, 2 = free but in its lock-delay (no waiter goes before the
-- delay ends); sleep = how long the caller may sleep at most before trying
-- again (ms; -1: held with no expiry and the caller does not queue).
--
-- Deadlines (Redisson's rules): a newcomer's is the last waiter's plus its
-- slot (or the holder's TTL plus its slot); when a waiter takes the lock or
-- leaves, everybody behind it moves up a slot (deadline - slot); only the head
-- is ever dropped, and dropping it moves nobody. Beyond Redisson:
--   - a waiter that is still alive keeps its entry fresh on every attempt, the
--     one that joins included: its deadline becomes at least now + slot x (its
--     place + 1), so that as long as it tries again within one slot (dlock
--     waiters sleep half a slot at most) it is never dropped, however long the
--     lock stays held;
--   - the head's turn starts when the lock is found free (here, or by a
--     release): its deadline is cut to now + grace (ARGV[6]) at most, so a
--     dead head delays the others by one configured slot after the lock is
--     free, not by the TTL the holder had when the head queued. The cut never
--     uses the newcomer's own wait: a live head (a Redisson waiter in a GC
--     pause, say) keeps its turn for the grace, or until the deadline its own
--     client set if that comes sooner.
-- Times are the server's clock.
--@include delay.lua
--@include fence_check.lua
--@include quarantine.lua
--@include own_keys.lua
local lock, queue, deadlines = KEYS[1], KEYS[2], KEYS[3]
local own = own_keys(5)
local owner, slot = ARGV[2], tonumber(ARGV[3])
local delay = tonumber(ARGV[7] or '0')
local marker = own['dlock_lock_delay:']
local writes = delay > 0 and marker or nil   -- the marker this caller writes
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- Every check before the first write: Redis does not roll a script back. A
-- lock, queue or deadlines key of another type makes EXISTS/HEXISTS, LINDEX
-- or ZSCORE raise WRONGTYPE before anything is written (the deadlines are
-- read before any write whenever the queue has an entry, and written first
-- when it has none); a hash that is not a lock is checked here.
local held = redis.call('exists', lock) == 1
local v = held and redis.call('hmget', lock, owner, 'mode')
local mine = held and v[1] ~= false
if mine and v[2] then
  -- The owner's field is its read hold of a read-write lock (same owner id).
  return redis.error_reply('WRONGTYPE the key holds a read-write lock')
end
if mine and ARGV[8] == '1' then
  return redis.error_reply('DLOCKREENTRY the caller holds this non-reentrant fair lock already')
end
if held and not mine then
  local kv = redis.call('hgetall', lock)
  for i = 1, #kv, 2 do
    if kv[i] == 'mode' then
      return redis.error_reply('WRONGTYPE the key holds a read-write lock')
    end
    if not string.find(kv[i], ':', 1, true) or not tonumber(kv[i + 1]) then
      return redis.error_reply('WRONGTYPE the key holds a hash that is not a lock')
    end
  end
end
local bad = delay_wrongtype(writes) or fence_wrongtype(ARGV[4], KEYS[4]) or
            quarantine_refusal(own['dlock_quarantine:'])   -- reentries too: see lock/acquire
if bad then
  return bad
end

-- Drop heads whose deadline passed (the first LINDEX also tells a queue key
-- of another type, with words better than Redis's own).
local first = redis.pcall('lindex', queue, 0)
if type(first) == 'table' and first.err then
  return redis.error_reply('WRONGTYPE the queue ' .. queue .. ' is not a list')
end
while true do
  local head = redis.call('lindex', queue, 0)
  if not head then
    break
  end
  local d = redis.call('zscore', deadlines, head)
  if d and tonumber(d) <= now then
    redis.call('zrem', deadlines, head)
    redis.call('lpop', queue)
  else
    break
  end
end

local function take()
  redis.call('hincrby', lock, owner, 1)
  redis.call('pexpire', lock, ARGV[1])
  delay_write(writes, owner, ARGV[1], delay)
  if ARGV[4] == '1' then
    local token_key = KEYS[4]   -- t: the TIME read above
--@include fence_token.lua
  end
  return nil
end

if mine then
  return take()   -- reentry, whoever waits
end
-- Free, but its last holder lost it without a release: the delay's ms left
-- (0: none). Until it ends the lock counts as held (by the lost holder).
local delayed = 0
if not held then
  delayed = delay_left(marker, owner)
end
local head = redis.call('lindex', queue, 0)
if not held and delayed == 0 and (not head or head == owner) then
  -- Free, and nobody goes before the caller: its turn.
  if head then
    redis.call('lpop', queue)
  end
  redis.call('zrem', deadlines, owner)
  local behind = redis.call('zrange', deadlines, 0, -1)
  for i = 1, #behind do
    redis.call('zincrby', deadlines, -slot, behind[i])
  end
  return take()
end

local pttl = redis.call('pttl', lock)
local why = held and 0 or 1
if delayed > 0 then
  pttl, why = delayed, 2
end
if ARGV[5] ~= '1' then
  return {pttl, why}
end

-- The caller waits: join the queue, or keep its entry fresh.
local pos = redis.call('lpos', queue, owner)
if not pos then
  local last = redis.call('lindex', queue, -1)
  local base = nil
  if last and last ~= owner then
    base = tonumber(redis.call('zscore', deadlines, last))
  end
  if not base then
    base = now + math.max(pttl, 0)
  end
  redis.call('zadd', deadlines, base + slot, owner)
  pos = redis.call('rpush', queue, owner) - 1
  -- Never a deadline fresher entries would not have (see the top): the last
  -- one's may have passed unrenewed (a dead waiter behind a live head, an
  -- entry a failover brought back), and the newcomer would be dropped with
  -- it before its next attempt renews its own.
  if base + slot < now + slot * (pos + 1) then
    redis.call('zadd', deadlines, now + slot * (pos + 1), owner)
  end
else
  local want = now + slot * (pos + 1)
  local d = tonumber(redis.call('zscore', deadlines, owner))
  if not d or d < want then
    redis.call('zadd', deadlines, want, owner)
  end
end

-- Sleep until a wake-up (the head's own channel hears each release), the
-- holder's TTL, or, when the lock is free, the head's deadline; at most half
-- a slot, to keep the entry fresh.
local sleep = math.floor(slot / 2)
if held or delayed > 0 then
  if pttl >= 0 and pttl < sleep then
    sleep = pttl
  end
else
  -- Free: the head's turn has started (see the top).
  local grace = tonumber(ARGV[6])
  local first = redis.call('lindex', queue, 0)
  local d = tonumber(redis.call('zscore', deadlines, first))
  if d and d > now + grace then
    d = now + grace
    redis.call('zadd', deadlines, d, first)
  end
  if d and d - now < sleep then
    sleep = math.max(d - now, 0)
  end
end
return {sleep, why}
