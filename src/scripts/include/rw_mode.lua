-- Fragment (--@include, see cmake/embed_scripts.cmake) of the read-write
-- lock's scripts: mode = the lock's mode, "read" or "write", or nil when it is
-- free. A key of another type, or a hash without a valid mode (a reentrant
-- lock, or somebody's data), is refused (WRONGTYPE) before anything is
-- written. Needs: lock.
local mode = redis.call('hget', lock, 'mode')   -- WRONGTYPE if not a hash
if not mode then
  if redis.call('exists', lock) == 1 then
    return redis.error_reply('WRONGTYPE the key holds a hash without a read-write lock ' ..
                             'mode (a lock, or somebody\'s data)')
  end
elseif mode ~= 'read' and mode ~= 'write' then
  return redis.error_reply('WRONGTYPE the key holds a hash whose mode is not read or write')
end
