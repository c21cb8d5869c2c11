-- Read a snapshot of one or more locks of any kind, atomically, for status
-- and listings.
--
-- KEYS[5i-4]  a lock (hash)
-- KEYS[5i-3]  its fencing-token counter, redisson_lock_token:{name}
-- KEYS[5i-2]  its fair queue, redisson_lock_queue:{name}
-- KEYS[5i-1]  its fair deadlines, redisson_lock_timeout:{name}
-- KEYS[5i]    its reservation of the next turn, dlock_lock_next:{name}
--
-- Returns, per lock: {type, pttl, token or false, queue, deadlines,
-- reservation or false, reservation pttl, field1, value1, ...}: type is
-- Redis's TYPE of the lock key ("none", "hash", ...); queue the owner ids in
-- order; deadlines each one's deadline in ms from now (-1: none); fields are
-- read only for hashes. Keys of another type than expected read as empty.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function typed(key, want)
  return redis.call('type', key).ok == want
end
local out = {}
for i = 1, #KEYS, 5 do
  local lock, queue, deadlines, resv = KEYS[i], KEYS[i + 2], KEYS[i + 3], KEYS[i + 4]
  local kind = redis.call('type', lock).ok
  local token = false
  if typed(KEYS[i + 1], 'string') then
    token = redis.call('get', KEYS[i + 1])
  end
  local q, d = {}, {}
  if typed(queue, 'list') then
    q = redis.call('lrange', queue, 0, -1)
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
  if kind == 'hash' then
    local fields = redis.call('hgetall', lock)
    for j = 1, #fields do
      entry[#entry + 1] = fields[j]
    end
  end
  out[#out + 1] = entry
end
return out
