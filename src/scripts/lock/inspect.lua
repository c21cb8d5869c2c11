-- Read a snapshot of one or more locks, atomically, for status and listings.
--
-- KEYS[2i-1]  a lock (hash)
-- KEYS[2i]    its fencing-token counter, redisson_lock_token:{name}
--
-- Returns, per lock: {type, pttl, token or false, field1, value1, ...}.
-- type is Redis's TYPE ("none", "hash", ...); fields are read only for hashes.
local out = {}
for i = 1, #KEYS, 2 do
  local lock = KEYS[i]
  local t = redis.call('type', lock).ok
  local entry = {t, redis.call('pttl', lock), redis.call('get', KEYS[i + 1]) or false}
  if t == 'hash' then
    local fields = redis.call('hgetall', lock)
    for j = 1, #fields do
      entry[#entry + 1] = fields[j]
    end
  end
  out[#out + 1] = entry
end
return out
