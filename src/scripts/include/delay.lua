-- The lock-delay marker (dlock's own; docs/wire-format.md), shared by the
-- reentrant and fair locks' scripts: a string holding the holder's owner id,
-- living the lease + the delay; written by every acquisition and renewal,
-- deleted by the last release. `marker` is nil without a delay: every helper
-- then does nothing.

-- An error reply when the marker key holds another type (somebody's data,
-- never written), else nil. Called before the script's first write.
local function delay_wrongtype(marker)
  if marker then
    local t = redis.call('type', marker).ok
    if t ~= 'none' and t ~= 'string' then
      return redis.error_reply('WRONGTYPE lock-delay marker ' .. marker .. ' holds another type')
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

-- The last hold's release: a lock released properly is free at once.
local function delay_clear(marker)
  if marker and redis.call('type', marker).ok == 'string' then
    redis.call('del', marker)
  end
end
