-- Renew a batch of barrier members in one call (all keys in one slot): each
-- member's lease is set to now + the watchdog timeout.
--
-- KEYS[i]    pairs, one per member: the state dlock_barrier:{name}, then
--            the members dlock_barrier:{name}:members
-- ARGV[1]    the watchdog timeout in ms
-- ARGV[i+1]  the member id of pair i
--
-- Returns one integer per member: 1 renewed, 0 gone (it left, its lease ran
-- out, or the barrier's keys were deleted: the client reports it lost). A
-- key replaced by another type counts as gone for its own member (pcall).
--
-- With client tracking on, no KEYS: ARGV[2] = the number of keys, ARGV[3..]
-- the keys, then the per-hold arguments (include/renew_keys.lua says why).
--@include now.lua
--@include barrier_keep.lua
local lease = tonumber(ARGV[1])
--@include renew_keys.lua
return renewed(2, function(i)
  local state, members, id = keys[2 * i - 1], keys[2 * i], ARGV[a + i]
  local s = redis.pcall('zscore', members, id)
  if type(s) ~= 'string' or tonumber(s) <= now or redis.pcall('hexists', state, 'round') ~= 1 then
    return false
  end
  redis.call('zadd', members, 'xx', now + lease, id)
  keep(state, members, lease)
  return true
end)
