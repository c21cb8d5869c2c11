-- What a double barrier is now (dlock's own, src/sync/barrier.c); writes
-- nothing.
--
-- KEYS[1]  the state, dlock_barrier:{name}
-- KEYS[2]  the members, dlock_barrier:{name}:members
--
-- Answers {parties, open, members, round}: the round's N (0: no round),
-- 1 when it has opened, the members whose lease has not run out, the
-- round's id (0: none).
--@include now.lua
--@include barrier_state.lua
if not parties then
  return {0, 0, 0, 0}
end
return {parties, open and 1 or 0, redis.call('zcount', members, '(' .. now, '+inf'),
        tonumber(round)}
