-- Leave a double barrier (dlock's own, src/sync/barrier.c), or see whether
-- the round left is over; also a waiting entrant's withdrawal.
--
-- KEYS[1]  the state, dlock_barrier:{name}
-- KEYS[2]  the members, dlock_barrier:{name}:members
-- KEYS[3]  the channel, dlock_barrier__channel:{name}
-- ARGV[1]  the member id
-- ARGV[2]  the round it entered
-- ARGV[3]  1: leave (the member goes); 0: only look (a leaver's later tries)
--
-- Members whose lease ran out are dropped first. The last member to go
-- ends the round: both keys deleted, "0" published. Answers:
--   {1}                   the round is over: everyone left (or was dropped)
--   {0, ttl, count}       count members are still in; sleep until a message
--                         or ttl ms (the first of their leases to end)
--   {-1}                  leave only: the member was no longer in its round
--                         (dropped after its lease ran out, or the round's
--                         keys deleted); nothing changed
--@include now.lua
--@include barrier_state.lua
local me, entered, go = ARGV[1], ARGV[2], ARGV[3] == '1'
sweep()
if not parties or round ~= entered then
  return go and {-1} or {1}
end
if go and redis.call('zrem', members, me) == 0 then
  return {-1}
end
local count = redis.call('zcard', members)
if count == 0 then
  redis.call('del', state, members)
  redis.call('publish', channel, '0')
  return {1}
end
return {0, earliest(), count}
