-- Adopt a hold handed over (transfer.lua; dlock's own): the lock's TTL
-- becomes the receiver's lease, only when the receiver holds it, and its
-- hold count is answered (the client's watchdog counts that many).
--
-- KEYS[1]  the lock (hash: field <owner id> = hold count)
-- KEYS[2]  (optional) the lock-delay marker, dlock_lock_delay:{name} (dlock's
--          own): when it names the receiver it keeps its margin past the
--          lock's TTL
-- ARGV[1]  the receiver's field (its owner id)
-- ARGV[2]  the lease in ms, from now
--
-- Returns the receiver's hold count, 0 when it holds nothing (nothing
-- written). A key of another type, a read-write lock's hash or a hash that
-- is not a lock answers WRONGTYPE, nothing written.
--@include delay.lua
--@include delay_move.lua
--@include own_keys.lua
--@include lock_shape.lua
local lock, owner = KEYS[1], ARGV[1]
local bad = lock_refusal(lock)
if bad then
  return bad
end
local n = tonumber(redis.call('hget', lock, owner))
if not n then
  return 0
end
local old = redis.call('pttl', lock)
redis.call('pexpire', lock, ARGV[2])
delay_move(own_keys(2)['dlock_lock_delay:'], owner, owner, old, tonumber(ARGV[2]))
return n
