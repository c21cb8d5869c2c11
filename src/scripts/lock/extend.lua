-- Extend a hold taken with a fixed lease (dlock's own; Redisson has none):
-- the lock's TTL becomes the new lease, only when the caller holds it. The
-- hold count and the fencing token are left as they are.
--
-- KEYS[1]  the lock (hash: field <owner id> = hold count)
-- ARGV[1]  the owner's field
-- ARGV[2]  the new lease in ms, from now
--
-- Returns 1 when extended, 0 when the owner holds nothing (never held,
-- released, expired). A key of another type, a read-write lock's hash or a
-- hash that is not a lock answers WRONGTYPE, and nothing is written.
local t = redis.call('type', KEYS[1]).ok
if t == 'none' then
  return 0
end
if t ~= 'hash' then
  return redis.error_reply('WRONGTYPE the key holds a ' .. t .. ', not a lock')
end
if redis.call('hexists', KEYS[1], 'mode') == 1 then
  return redis.error_reply('WRONGTYPE the key holds a read-write lock')
end
local n = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
if not n then
  return 0
end
redis.call('pexpire', KEYS[1], ARGV[2])
return 1
