-- Hand a reentrant lock's hold over to another owner (dlock's own; Redisson
-- has none): the giver's field goes and the receiver's gets its whole hold
-- count, in one script, so that nobody else can take the lock in between.
-- Nothing is published: no waiter is woken, the lock stays held. The TTL is
-- raised to ARGV[3] when it is shorter (the receiver then has a full lease
-- to adopt the hold in), never lowered; the fencing token is unchanged.
--
-- KEYS[1]  the lock (hash: field <owner id> = hold count)
-- KEYS[2]  (optional) the lock-delay marker, dlock_lock_delay:{name} (dlock's
--          own): when it names the giver, it names the receiver after, with
--          the same margin past the lock's TTL
-- ARGV[1]  the giver's field (its owner id)
-- ARGV[2]  the receiver's field (another owner id, "<id>:<n>")
-- ARGV[3]  the least TTL in ms the lock keeps (the watchdog timeout)
--
-- Returns 1 when handed over, 0 when the giver holds nothing (never held,
-- released, expired, handed over already); nothing is written then. A key of
-- another type, a read-write lock's hash or a hash that is not a lock
-- answers WRONGTYPE, nothing written. A receiver that has a field already
-- (a hash of two owners, which no dlock or Redisson client makes) gets the
-- giver's count added to its own.
--@include delay.lua
--@include delay_move.lua
--@include own_keys.lua
--@include lock_shape.lua
local lock, giver, to = KEYS[1], ARGV[1], ARGV[2]
local bad = lock_refusal(lock)
if bad then
  return bad
end
local n = tonumber(redis.call('hget', lock, giver))
if not n then
  return 0
end
local marker = own_keys(2)['dlock_lock_delay:']
local old = redis.call('pttl', lock)
local new = old
if old >= 0 and old < tonumber(ARGV[3]) then
  new = tonumber(ARGV[3])
end
-- The receiver's field first: the giver's was the last, and a hash left
-- empty would be deleted with its TTL.
redis.call('hincrby', lock, to, n)
redis.call('hdel', lock, giver)
if new ~= old then
  redis.call('pexpire', lock, new)
end
delay_move(marker, giver, to, old, new)
return 1
