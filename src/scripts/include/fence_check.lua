-- Fragment (--@include, see cmake/embed_scripts.cmake) of the lock types'
-- acquire scripts: fence_wrongtype(fenced, key) = an error reply when the
-- acquisition counts a fencing token (fenced, the script's argument, is "1")
-- and the counter `key` (redisson_lock_token:{name}) exists but holds no
-- number (somebody's data, never written), else nil. Called before the
-- script's first write: fence_token.lua writes the counter after it.
local function fence_wrongtype(fenced, key)
  if fenced ~= '1' then
    return nil
  end
  local t = redis.call('type', key).ok
  if t ~= 'none' and (t ~= 'string' or not tonumber(redis.call('get', key))) then
    return redis.error_reply('WRONGTYPE fencing token key ' .. key .. ' holds no number')
  end
  return nil
end
