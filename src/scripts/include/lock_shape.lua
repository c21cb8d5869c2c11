-- Fragment (--@include, see cmake/embed_scripts.cmake) of the reentrant and
-- fair locks' scripts: not_a_lock(lock) = nil when the hash at `lock` has the
-- shape of a lock (every field an owner id "<id>:<n>" holding a count), else
-- what it is: 'a read-write lock' (a "mode" field) or 'a hash that is not a
-- lock' (somebody's data). A key of another type raises WRONGTYPE at HGETALL.
local function not_a_lock(lock)
  local kv = redis.call('hgetall', lock)
  for i = 1, #kv, 2 do
    if kv[i] == 'mode' then
      return 'a read-write lock'
    end
    if not string.find(kv[i], ':', 1, true) or not tonumber(kv[i + 1]) then
      return 'a hash that is not a lock'
    end
  end
  return nil
end

-- lock_refusal(lock) = a WRONGTYPE error reply when the key is not a lock
-- (another type, a read-write lock, somebody's hash), else nil (a lock, or
-- no key at all).
local function lock_refusal(lock)
  local t = redis.call('type', lock).ok
  if t == 'none' then
    return nil
  end
  if t ~= 'hash' then
    return redis.error_reply('WRONGTYPE the key holds a ' .. t .. ', not a lock')
  end
  local what = not_a_lock(lock)
  if what then
    return redis.error_reply('WRONGTYPE the key holds ' .. what)
  end
  return nil
end
