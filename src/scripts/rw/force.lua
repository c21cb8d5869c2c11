-- Delete a read-write lock whoever holds it, when it is in the handle's mode,
-- and wake its waiters (Redisson's forceUnlock of the read or write lock).
--
-- KEYS[1]  the lock (hash)
-- KEYS[2]  the lock's channel, redisson_rwlock:{name}
-- ARGV[1]  the mode the handle deletes: "read" or "write"
-- ARGV[2]  the message to publish: "0" (read) or "1" (write), as Redisson
--
-- Returns 1 when the lock was deleted, 0 when there was none or it is in the
-- other mode. The read holds' timeout keys are left to expire (as Redisson).
-- A key of another type, or a hash without a valid "mode", is left alone.
local t = redis.call('type', KEYS[1]).ok
if t == 'none' then
  return 0
end
if t ~= 'hash' then
  return redis.error_reply('WRONGTYPE the key holds a ' .. t)
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode ~= 'read' and mode ~= 'write' then
  return redis.error_reply('WRONGTYPE the key holds a hash without a read-write lock ' ..
                           'mode (a lock, or somebody\'s data)')
end
if mode ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[2])
return 1
