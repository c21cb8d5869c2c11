-- Whether a read-write lock is held in the handle's sense (Redisson's
-- isLocked of the read or the write lock).
--
-- KEYS[1]  the lock (hash)
-- ARGV[1]  "read" or "write"
--
-- Returns 1 or 0. Write: mode is "write". Read: mode is "read", or "write"
-- while the writer also holds read holds (a field beside mode and its own).
-- A key of another type, or a hash without a valid "mode", answers WRONGTYPE.
local mode = redis.call('hget', KEYS[1], 'mode')   -- WRONGTYPE if not a hash
if not mode then
  if redis.call('exists', KEYS[1]) == 1 then
    return redis.error_reply('WRONGTYPE the key holds a hash without a read-write lock ' ..
                             'mode (a lock, or somebody\'s data)')
  end
  return 0
end
if mode ~= 'read' and mode ~= 'write' then
  return redis.error_reply('WRONGTYPE the key holds a hash whose mode is not read or write')
end
if mode == ARGV[1] or (ARGV[1] == 'read' and redis.call('hlen', KEYS[1]) > 2) then
  return 1
end
return 0
