-- Fragment (--@include, see cmake/embed_scripts.cmake) of the double
-- barrier's scripts (scripts/barrier/, src/sync/barrier.c): reads the
-- barrier of KEYS[1] (the state hash: parties, round, open) and KEYS[2] (the
-- members: a sorted set of member id -> the server time its lease ends, ms),
-- KEYS[3] its channel (may be absent: read-only scripts). A key of another
-- type, or a hash that is not a barrier's, is refused (WRONGTYPE) before
-- anything is written. Sets parties (nil: no round), round (the round's id,
-- a decimal string), open (the round has opened: all its parties entered).
-- sweep() drops the members whose lease ran out by now; a round left with
-- none ends (both keys deleted, "0" published). earliest() = ms until the
-- first lease of a member ends (-1: none). Needs: now.
local state, members, channel = KEYS[1], KEYS[2], KEYS[3]
local stype, mtype = redis.call('type', state).ok, redis.call('type', members).ok
if (stype ~= 'none' and stype ~= 'hash') or (mtype ~= 'none' and mtype ~= 'zset') then
  return redis.error_reply('WRONGTYPE a key of the barrier holds a ' ..
                           (stype ~= 'none' and stype ~= 'hash' and stype or mtype) ..
                           ', not the barrier\'s hash and sorted set')
end
local v = redis.call('hmget', state, 'parties', 'round', 'open')
if stype == 'hash' and not (tonumber(v[1]) and v[2]) then
  return redis.error_reply('WRONGTYPE the key holds a hash that is not a barrier\'s state')
end
local parties, round, open = tonumber(v[1]), v[2], v[3] == '1'

local function sweep()
  if not parties then
    if mtype == 'zset' then
      redis.call('del', members)   -- left without its state (deleted by hand): no barrier
    end
    return
  end
  redis.call('zremrangebyscore', members, '-inf', now)
  if redis.call('zcard', members) == 0 then
    redis.call('del', state, members)
    redis.call('publish', channel, '0')
    parties, round, open = nil, nil, false
  end
end

local function earliest()
  local first = redis.call('zrange', members, 0, 0, 'withscores')
  if not first[2] then
    return -1
  end
  return math.max(tonumber(first[2]) - now, 0)
end
