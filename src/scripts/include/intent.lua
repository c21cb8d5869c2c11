-- The writers' intents of a writer-first read-write lock (dlock's own;
-- docs/wire-format.md): a sorted set dlock_write_intent:{name}, member a
-- waiting writer's field <owner id>:write, score the server's time (TIME, ms)
-- at which its intent lapses unless the writer renews it. Written by a
-- writer-first writer's attempt that finds the lock busy and means to wait,
-- removed by its acquisition and by its giving up; a dead writer's entry
-- lapses at its score. A writer-first reader that holds no read hold is
-- refused while another writer's entry lives. `ikey` nil: not given (the
-- handle is not writer-first, or an ACL refuses the key): every helper then
-- does nothing. Redisson neither reads nor writes the set.

local function intent_now()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- An error reply when the set's key holds another type (somebody's data,
-- never written), else nil. Called before the script's first write.
local function intent_wrongtype(ikey)
  if ikey then
    local t = redis.call('type', ikey).ok
    if t ~= 'none' and t ~= 'zset' then
      return redis.error_reply('WRONGTYPE writers\' intents ' .. ikey .. ' holds another type')
    end
  end
  return nil
end

-- The writer `field` waits: its intent lives `life` ms from now (renewed by
-- each of its attempts). The key lives as long as its latest entry.
local function intent_write(ikey, field, life)
  life = tonumber(life or '0')
  if ikey and life and life > 0 then
    redis.call('zadd', ikey, intent_now() + life, field)
    if redis.call('pttl', ikey) < life then
      redis.call('pexpire', ikey, life)
    end
  end
end

-- The ms until the last live intent of a writer other than `field` lapses
-- (0: none). Lapsed entries go.
local function intent_left(ikey, field)
  if not ikey or redis.call('type', ikey).ok ~= 'zset' then
    return 0
  end
  local now = intent_now()
  redis.call('zremrangebyscore', ikey, '-inf', now)
  local live = redis.call('zrangebyscore', ikey, '(' .. now, '+inf', 'withscores')
  local left = 0
  for i = 1, #live, 2 do
    if live[i] ~= field then
      left = math.max(left, tonumber(live[i + 1]) - now)
    end
  end
  return left
end

-- The writer `field` stops waiting (it took the lock, or gave up): true when
-- it had an entry.
local function intent_clear(ikey, field)
  if ikey and redis.call('type', ikey).ok == 'zset' then
    return redis.call('zrem', ikey, field) == 1
  end
  return false
end
