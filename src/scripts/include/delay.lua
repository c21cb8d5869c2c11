-- The lock-delay marker (dlock's own; docs/wire-format.md), shared by the
-- scripts of the reentrant and fair locks and of a read-write lock's writer:
-- a string holding the holder's owner id (a writer's: its field
-- <owner id>:write), living the lease + the delay; written by every
-- acquisition and renewal of a holder with a delay, deleted by its last
-- release (or by its release after a loss). Every dlock acquisition is given
-- the marker and honours it, whatever its own delay: the delay is the
-- holder's. `marker` is nil when the caller's client does not use dlock's
-- own keys (an ACL refuses them): every helper then does nothing.

-- The key of a lock-delay given with the delay `ms` (the script's argument,
-- absent or "0": none): `key`, or nil without a delay.
local function delay_key(ms, key)
  if tonumber(ms or '0') > 0 then
    return key
  end
  return nil
end

-- An error reply when the marker key (or, with want 'zset', a read-write
-- lock's set below) holds another type (somebody's data, never written),
-- else nil. Called before the script's first write.
local function delay_wrongtype(key, want)
  want = want or 'string'
  if key then
    local t = redis.call('type', key).ok
    if t ~= 'none' and t ~= want then
      return redis.error_reply('WRONGTYPE lock-delay ' .. (want == 'zset' and 'set ' or 'marker ') ..
                               key .. ' holds another type')
    end
  end
  return nil
end

-- The ms left of a delay that keeps `owner` out: the marker lives with
-- another owner's id (its holder lost the lock without a release). 0: none.
local function delay_left(marker, owner)
  if not marker then
    return 0
  end
  local m = redis.pcall('get', marker)
  if type(m) ~= 'string' or m == owner then
    return 0
  end
  return math.max(redis.call('pttl', marker), 0)
end

-- After an acquisition (or a renewal) by `owner` with lease `lease` ms.
local function delay_write(marker, owner, lease, delay)
  if marker then
    redis.call('set', marker, owner, 'px', tonumber(lease) + delay)
  end
end

-- A release that keeps holds and sets a new lease (ms): the marker follows.
local function delay_extend(marker, lease, delay)
  if marker and redis.call('type', marker).ok == 'string' then
    redis.call('pexpire', marker, tonumber(lease) + delay)
  end
end

-- The last hold's release by `owner` (the marker's value), or its release
-- after it lost the lock: a lock released properly is free at once. Another
-- owner's marker stays (a Redisson client, which ignores markers, may hold
-- the lock while a lost dlock holder's delay runs).
local function delay_clear(marker, owner)
  if marker and redis.pcall('get', marker) == owner then
    redis.call('del', marker)
    return true
  end
  return false
end

-- The read holds of a read-write lock (dlock's own; docs/wire-format.md): a
-- sorted set dlock_read_delay:{name}, member a reader's owner id, score the
-- server's time in ms when the delay after its latest read hold ends (the
-- hold's expiry + the delay). A reader's loss delays writers only: readers
-- never look at it. A writer's hold uses the string marker above, which
-- delays readers and writers alike. `rset` is nil without a delay.

local function delay_now()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The ms left of the longest delay left by a reader other than `owner` that
-- lost its hold without releasing it. 0: none.
local function rdelay_left(rset, owner)
  if not rset or redis.call('type', rset).ok ~= 'zset' then
    return 0
  end
  local now = delay_now()
  local live = redis.call('zrangebyscore', rset, '(' .. now, '+inf', 'withscores')
  local left = 0
  for i = 1, #live, 2 do
    if live[i] ~= owner then
      left = math.max(left, tonumber(live[i + 1]) - now)
    end
  end
  return left
end

-- After a read acquisition or renewal by `owner` whose hold now lives
-- `lease` ms: its entry ends no sooner than lease + delay from now; entries
-- whose delay is over go.
local function rdelay_write(rset, owner, lease, delay)
  if rset then
    local now, span = delay_now(), tonumber(lease) + delay
    local old = tonumber(redis.call('zscore', rset, owner))
    if not old or old < now + span then
      redis.call('zadd', rset, now + span, owner)
    end
    local over = redis.call('zrangebyscore', rset, '-inf', now)
    for i = 1, #over, 1000 do
      redis.call('zrem', rset, unpack(over, i, math.min(i + 999, #over)))
    end
    if redis.call('pttl', rset) < span then
      redis.call('pexpire', rset, span)
    end
  end
end

-- The owner's last read hold was released: no delay on its account. True
-- when it had an entry.
local function rdelay_clear(rset, owner)
  if rset and redis.call('type', rset).ok == 'zset' then
    return redis.call('zrem', rset, owner) == 1
  end
  return false
end

-- The permit-expirable semaphore's lock-delay (dlock's own;
-- docs/wire-format.md): a sorted set dlock_permit_delay:{name}, member a
-- permit id (16 bytes), score the server's ms when the delay after its lease
-- ends; written with the permit and renewed with it (rdelay_write), removed by
-- its release (rdelay_clear). A permit whose entry lives but which is no
-- longer held (its lease ran out unreleased: the sweep put it back in the
-- pool) does not count as available. The ms until `n` of the `have`
-- available permits are out of every delay; 0 when they are now (or when
-- fewer than n are available anyway: the caller waits for permits first).
local function pdelay_left(pset, leases, have, n)
  if not pset or have < n or redis.call('type', pset).ok ~= 'zset' then
    return 0
  end
  local now = delay_now()
  local live = redis.call('zrangebyscore', pset, '(' .. now, '+inf', 'withscores')
  local ends = {}
  for i = 1, #live, 2 do
    if not redis.call('zscore', leases, live[i]) then
      ends[#ends + 1] = tonumber(live[i + 1])
    end
  end
  local k = n - (have - #ends)
  if k <= 0 then
    return 0
  end
  return math.max(ends[k] - now, 1)
end
