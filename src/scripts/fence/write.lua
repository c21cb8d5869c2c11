-- A fenced write (dlock's own): one write command on a key of data, done only
-- when the caller's fencing token is not lower than the highest token the
-- key's guard has seen, and the guard raised to it, atomically. A holder that
-- lost its lock (paused past its lease, cut off) and writes late is refused
-- once a newer holder (a higher token) has written.
--
-- KEYS[1]  the data key
-- KEYS[2]  its guard: dlock_fence:<key> when the key has a hash tag, else
--          dlock_fence:{<key>} (same cluster slot); a string, the highest
--          token seen, in decimal
-- ARGV[1]  the token: decimal, 1..20 digits, no leading zero
-- ARGV[2]  the command, one of the allowed writes below (any case)
-- ARGV[i]  its arguments after the key, ARGV[3] on
--
-- Returns {1, reply} when written (the command's own reply), {0, highest}
-- when refused (the guard holds a higher token; nothing written). The
-- command's error (WRONGTYPE, a syntax error) is returned as is, and nothing
-- is written then either: Redis checks a command's arguments and the key's
-- type before it writes, and the guard is raised only after the write. A
-- guard of another type is somebody's data: WRONGTYPE, nothing written.
--
-- The guard lives as long as the data: no TTL while the key has none, the
-- key's TTL plus a week when it has one, a week once the key is gone (a
-- deletion is remembered that long; see docs/wire-format.md).
local allowed = {
  SET = true, SETEX = true, PSETEX = true, SETNX = true, GETDEL = true, APPEND = true,
  SETRANGE = true, INCR = true, INCRBY = true, INCRBYFLOAT = true, DECR = true,
  DECRBY = true, DEL = true, UNLINK = true, EXPIRE = true, PEXPIRE = true, PERSIST = true,
  HSET = true, HSETNX = true, HDEL = true, HINCRBY = true, HINCRBYFLOAT = true,
  LPUSH = true, RPUSH = true, LPOP = true, RPOP = true, LSET = true, LTRIM = true,
  SADD = true, SREM = true, ZADD = true, ZREM = true, ZINCRBY = true,
  XADD = true, XDEL = true, XTRIM = true,
}
local TOMBSTONE_MS = 604800000
local data, guard, token = KEYS[1], KEYS[2], ARGV[1]
local cmd = string.upper(ARGV[2])
if not allowed[cmd] then
  return redis.error_reply('ERR ' .. cmd .. ' is not a write dlock fences')
end
if (cmd == 'DEL' or cmd == 'UNLINK') and #ARGV > 2 then
  return redis.error_reply('ERR a fenced ' .. cmd .. ' deletes its one key')
end
if not string.match(token, '^[1-9][0-9]*$') or #token > 20 then
  return redis.error_reply('ERR fencing token ' .. token .. ' is not a positive integer')
end

-- Tokens compare as decimal strings (exact at any size, where Lua's numbers
-- are exact up to 2^53 only).
local function lower(a, b)
  return #a < #b or (#a == #b and a < b)
end

local highest = redis.call('get', guard)   -- WRONGTYPE for somebody's data
if highest and lower(token, highest) then
  return {0, highest}
end

local args = {}
for i = 3, #ARGV do
  args[#args + 1] = ARGV[i]
end
local reply = redis.pcall(cmd, data, unpack(args))
if type(reply) == 'table' and reply.err then
  return reply
end

if not highest or lower(highest, token) then
  redis.call('set', guard, token)
end
local ttl = redis.call('pttl', data)
if ttl == -1 then
  redis.call('persist', guard)
elseif ttl > 0 then
  redis.call('pexpire', guard, ttl + TOMBSTONE_MS)
else
  redis.call('pexpire', guard, TOMBSTONE_MS)
end
return {1, reply}
