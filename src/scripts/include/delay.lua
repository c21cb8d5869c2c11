-- The lock-delay marker (dlock's own; docs/wire-format.md), shared by the
-- scripts of the reentrant and fair locks and of a read-write lock's writer:
-- a string "<end> <owner id>", `end` the server's time (TIME, ms) at which
-- the delay ends (the hold's expiry + the delay), the owner id the holder's
-- (a writer's: its field <owner id>:write). It has no TTL, so that a
-- volatile-* eviction policy, which takes keys with a TTL only, never takes
-- it with the lock (under allkeys-* nothing is safe). Written by every
-- acquisition and renewal of a holder with a delay, deleted by its last
-- release (or by its release after a loss), and by any dlock acquisition that
-- finds its delay over (a holder killed with its guard leaves it behind
-- until then). Every dlock acquisition is given the marker and honours it,
-- whatever its own delay: the delay is the holder's. `marker` is nil when
-- the caller's client does not use dlock's own keys (an ACL refuses them):
-- every helper then does nothing. A marker written by dlock 0.2 (the owner
-- id alone, with a TTL of the lease + the delay) is read as well.

-- The server's time in ms.
local function delay_now()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

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

-- The marker's holder and the ms its delay has left; nil when there is no
-- marker (or a key of another type, never ours), or when its delay is over:
-- such a marker is deleted here (only acquisitions, releases and hand-overs
-- read it: scripts that write anyway).
local function delay_read(marker)
  if not marker then
    return nil
  end
  local m = redis.pcall('get', marker)
  if type(m) ~= 'string' then
    return nil
  end
  local e, who = string.match(m, '^(%d+) (.+)$')
  local left
  if e then
    left = math.max(tonumber(e) - delay_now(), 0)
  else
    who, left = m, math.max(redis.call('pttl', marker), 0)   -- dlock 0.2's form
  end
  if left == 0 then
    redis.call('del', marker)
    return nil
  end
  return who, left
end

-- Writes the marker: `owner`'s delay ends `ms` from now.
local function delay_put(marker, owner, ms)
  redis.call('set', marker, string.format('%d %s', delay_now() + ms, owner))
end

-- The ms left of a delay that keeps `owner` out: the marker lives with
-- another owner's id (its holder lost the lock without a release). 0: none.
local function delay_left(marker, owner)
  local who, left = delay_read(marker)
  if not who or who == owner then
    return 0
  end
  return left
end

-- After an acquisition (or a renewal) by `owner` with lease `lease` ms.
local function delay_write(marker, owner, lease, delay)
  if marker then
    delay_put(marker, owner, tonumber(lease) + delay)
  end
end

-- A release that keeps holds and sets a new lease (ms): the marker follows.
local function delay_extend(marker, lease, delay)
  local who = delay_read(marker)
  if who then
    delay_put(marker, who, tonumber(lease) + delay)
  end
end

-- The last hold's release by `owner` (the marker's holder), or its release
-- after it lost the lock: a lock released properly is free at once. Another
-- owner's marker stays (a Redisson client, which ignores markers, may hold
-- the lock while a lost dlock holder's delay runs).
local function delay_clear(marker, owner)
  if delay_read(marker) == owner then
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
-- delays readers and writers alike. `rset` is nil without a delay. The set
-- has no TTL (as the marker, it outlives a volatile-* eviction of the lock):
-- every script that reads or writes it drops the entries that are over, and
-- Redis deletes it with its last entry.

-- The ms left of the longest delay left by a reader other than `owner` that
-- lost its hold without releasing it. 0: none.
local function rdelay_left(rset, owner)
  if not rset or redis.call('type', rset).ok ~= 'zset' then
    return 0
  end
  local now = delay_now()
  redis.call('zremrangebyscore', rset, '-inf', now)   -- over: the set has no TTL
  local live = redis.call('zrange', rset, 0, -1, 'withscores')
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
    redis.call('zremrangebyscore', rset, '-inf', now)
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
  redis.call('zremrangebyscore', pset, '-inf', now)   -- over: the set has no TTL
  local live = redis.call('zrange', pset, 0, -1, 'withscores')
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
