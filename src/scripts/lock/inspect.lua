-- Read a snapshot of one or more locks of any kind, of counts (semaphores,
-- permit-expirable semaphores, latches) or of rate limiters, atomically, for
-- status and listings.
--
-- KEYS[10i-9]  a lock (hash), a count (string) or a rate limiter (hash)
-- KEYS[10i-8]  its fencing-token counter, redisson_lock_token:{name}
-- KEYS[10i-7]  its fair queue, redisson_lock_queue:{name}
-- KEYS[10i-6]  its fair deadlines, redisson_lock_timeout:{name}
-- KEYS[10i-5]  its reservation of the next turn, dlock_lock_next:{name}
-- KEYS[10i-4]  a permit-expirable semaphore's leases, {name}:timeout
-- KEYS[10i-3]  a rate limiter's permits left, {name}:value
-- KEYS[10i-2]  a rate limiter's grants, {name}:permits
-- KEYS[10i-1]  the configurations of the rate limiters whose permits left a
-- KEYS[10i]    string so named may be ({X}:value[:<client id>]: X's, or
--              "{X}"'s), or the name itself where there is none
-- ARGV[1]     (optional) the most holders (hash fields, permits) and queue
--             entries read per name, 0 or absent: all
--
-- Returns, per name: {type, pttl, token or false, queue, deadlines,
-- reservation or false, reservation pttl, ...}: type is Redis's TYPE of the
-- name's key ("none", "hash", "string", ...); queue the owner ids in order;
-- deadlines each one's deadline in ms from now (-1: none). Then, for a hash:
-- field1, value1, ...; for a string: the count (false when the string is not
-- a whole number), 1 when the leases key is a sorted set (else 0; 2 below),
-- and per permit held: its id (16 bytes), the ms left on its lease (-1: no
-- expiry).
-- A lease that ran out is counted back into the count and not listed (the
-- next operation on the semaphore gives it back; this script writes nothing).
-- Keys of another type than expected read as empty.
--
-- A rate limiter (a hash of only Redisson's RRateLimiter fields, with rate,
-- interval and type set, whole numbers) reads as its fields, then the pair
-- "#rate", N: N (an integer, where a field's value is a string) the permits
-- an OVERALL limiter has left now, as its next call would count them (the
-- grants older than the interval counted back, never above the rate), -1
-- for a PER_CLIENT one (each client has its own) or when its keys hold other
-- data. A rate limiter's count of permits left reads as false (not a count)
-- followed by "rate".
--
-- With a limit, a name with more holders than it reads that many: a hash
-- its field "mode" first, then the first ones HSCAN gives, and its entry ends
-- with the pair "#total", N (N an integer, where a field's value is a string:
-- the holders it has, without "mode"); a permit semaphore's entry says 2 for
-- its leases (a sorted set read in part), then the permits held, then the
-- first ones. A fair queue is read up to the limit.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function typed(key, want)
  return redis.call('type', key).ok == want
end
--@include rate_fields.lua
-- The fields of the rate limiter configured at key (HMGET's), or nil when
-- key is not one.
local function rate_config(key)
  if not typed(key, 'hash') then
    return nil
  end
  local f, only = rate_fields(key)
  local function whole(v)
    return v and #v <= 18 and string.match(v, '^%d+$') ~= nil
  end
  if only and whole(f[1]) and whole(f[2]) and f[3] and (not f[4] or whole(f[4])) then
    return f
  end
  return nil
end
-- What an OVERALL limiter has left now: include/rate_state.lua's settle,
-- without its writes. -1 when its keys hold other data.
local function rate_left(vkey, pkey, rate, interval)
  local vt, pt = redis.call('type', vkey).ok, redis.call('type', pkey).ok
  if vt == 'none' then
    return rate   -- nobody took from it yet (or its count expired): whole
  end
  local v = vt == 'string' and redis.call('get', vkey)
  if not v or not string.match(v, '^%-?%d+$') or (pt ~= 'zset' and pt ~= 'none') then
    return -1
  end
  local left = tonumber(v)
  if pt == 'zset' then
    -- A grant that is not Redisson's encoding fails its unpacking: -1, not
    -- an error for the whole listing.
    local cutoff = string.format('%d', now - interval)
    local ok, freed = pcall(rate_granted, pkey, 0, cutoff)
    if not ok then
      return -1
    end
    left = left + freed
    if freed > 0 and left > rate then
      local live
      ok, live = pcall(rate_granted, pkey, '(' .. cutoff, '+inf')
      if not ok then
        return -1
      end
      left = rate - live
    end
  end
  return math.max(0, math.min(left, rate))
end
local limit = tonumber(ARGV[1] or '0') or 0
local out = {}
local NO_EXPIRY = 922337203685477
for i = 1, #KEYS, 10 do
  local lock, queue, deadlines, resv = KEYS[i], KEYS[i + 2], KEYS[i + 3], KEYS[i + 4]
  local kind = redis.call('type', lock).ok
  local token = false
  if typed(KEYS[i + 1], 'string') then
    token = redis.call('get', KEYS[i + 1])
  end
  local q, d = {}, {}
  if typed(queue, 'list') then
    q = redis.call('lrange', queue, 0, limit > 0 and limit - 1 or -1)
    local hasd = typed(deadlines, 'zset')
    for j = 1, #q do
      local s = hasd and redis.call('zscore', deadlines, q[j])
      d[j] = s and (tonumber(s) - now) or -1
    end
  end
  local r, rttl = false, -2
  if typed(resv, 'string') then
    r = redis.call('get', resv)
    rttl = redis.call('pttl', resv)
  end
  local entry = {kind, redis.call('pttl', lock), token, q, d, r, rttl}
  local rf = kind == 'hash' and rate_config(lock)
  if rf then
    local names = {'rate', 'interval', 'type', 'keepAliveTime'}
    for j = 1, 4 do
      if rf[j] then
        entry[#entry + 1] = names[j]
        entry[#entry + 1] = rf[j]
      end
    end
    entry[#entry + 1] = '#rate'
    entry[#entry + 1] = rf[3] == '1' and -1 or
                        rate_left(KEYS[i + 6], KEYS[i + 7], tonumber(rf[1]), tonumber(rf[2]))
  elseif kind == 'hash' then
    local n = limit > 0 and redis.call('hlen', lock) or 0
    if n <= limit then
      local fields = redis.call('hgetall', lock)
      for j = 1, #fields do
        entry[#entry + 1] = fields[j]
      end
    else
      local mode = redis.call('hget', lock, 'mode')
      if mode then
        entry[#entry + 1] = 'mode'
        entry[#entry + 1] = mode
        n = n - 1
      end
      local cursor, got = '0', 0
      repeat
        local page = redis.call('hscan', lock, cursor, 'COUNT', limit)
        cursor = page[1]
        for j = 1, #page[2], 2 do
          if got < limit and page[2][j] ~= 'mode' then
            entry[#entry + 1] = page[2][j]
            entry[#entry + 1] = page[2][j + 1]
            got = got + 1
          end
        end
      until cursor == '0' or got >= limit
      if n > got then
        entry[#entry + 1] = '#total'
        entry[#entry + 1] = n
      end
    end
  elseif kind == 'string' then
    local v = redis.call('get', lock)
    local c1, c2 = KEYS[i + 8], KEYS[i + 9]
    if (c1 ~= lock and rate_config(c1)) or (c2 ~= lock and rate_config(c2)) then
      entry[8] = false
      entry[9] = 'rate'
    elseif string.match(v, '^%-?%d+$') and #v <= 19 then
      local count = tonumber(v)
      local leases = KEYS[i + 5]
      local permits = {}
      local haz = typed(leases, 'zset')
      local total = haz and limit > 0 and redis.call('zcard', leases) or 0
      local held, cut = {}, false
      if haz and total <= limit then
        held = redis.call('zrange', leases, 0, -1, 'withscores')
      elseif haz then
        -- Past the limit: the leases that ran out counted (up to the limit:
        -- more than that left unswept is counted as the limit), the first
        -- ones held listed.
        local gone = redis.call('zrangebyscore', leases, '-inf', string.format('%d', now), 'LIMIT',
                                0, limit)
        count = count + #gone
        total = total - #gone
        held = redis.call('zrangebyscore', leases, '(' .. string.format('%d', now), '+inf',
                          'WITHSCORES', 'LIMIT', 0, limit)
        cut = total > #held / 2
      end
      for j = 1, #held, 2 do
        local until_ms = tonumber(held[j + 1])
        if until_ms >= NO_EXPIRY then
          permits[#permits + 1] = held[j]
          permits[#permits + 1] = -1
        elseif until_ms > now then
          permits[#permits + 1] = held[j]
          permits[#permits + 1] = until_ms - now
        else
          count = count + 1
        end
      end
      entry[8] = count
      entry[9] = cut and 2 or haz and 1 or 0
      if cut then
        entry[10] = total
      end
      for j = 1, #permits do
        entry[#entry + 1] = permits[j]
      end
    else
      entry[8] = false
    end
  end
  out[#out + 1] = entry
end
return out
