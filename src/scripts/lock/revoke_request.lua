-- Ask the holders of a lock to let it go (dlock's revoke request; nothing of
-- Redisson's reads the record or the channel). Nothing is taken from them:
-- the holders that listen (a handle with a revoke handler) decide.
--
-- KEYS[1]  the lock (hash)
-- KEYS[2]  the request's record, dlock_revoke_request:{name}
-- KEYS[3]  the requests' channel, dlock_revoke_request__channel:{name} (a key
--          so that a cluster routes it and SPUBLISH stays in the lock's slot)
-- ARGV[1]  the request's id (unique per request)
-- ARGV[2]  the record's lifetime in ms
-- ARGV[3]  the asker's note (may be empty)
--
-- The request (the message published, and the record's value):
--   "<id>\n<n>\n<holder 1>\n...<holder n>\n<note>"
-- where the holders are the hash's fields other than "mode" (owner ids, a
-- writer's with its ":write" suffix). The record lets a holder that
-- (re)subscribes just after the message went read it.
--
-- Returns {holders, listeners}: {0, 0} when the lock is free (nothing
-- written, nothing published), else the number of holders asked and the
-- number of connections subscribed to the channel that got the message.
-- A key of another type answers WRONGTYPE and is left as it is.
local t = redis.call('type', KEYS[1]).ok
if t == 'none' then
  return {0, 0}
end
if t ~= 'hash' then
  return redis.error_reply('WRONGTYPE the key holds a ' .. t .. ', not a lock')
end
local holders = {}
local kv = redis.call('hgetall', KEYS[1])
for i = 1, #kv, 2 do
  local f = kv[i]
  if f ~= 'mode' and string.find(f, ':', 1, true) then
    holders[#holders + 1] = f
  end
end
if #holders == 0 then
  return redis.error_reply('WRONGTYPE the key holds a hash that is not a lock')
end
local msg = ARGV[1] .. '\n' .. #holders .. '\n' .. table.concat(holders, '\n') .. '\n' .. ARGV[3]
redis.call('set', KEYS[2], msg, 'px', ARGV[2])
local n = redis.call('publish', KEYS[3], msg)
return {#holders, n}
