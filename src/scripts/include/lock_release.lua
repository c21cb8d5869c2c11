-- Fragment (--@include, see cmake/embed_scripts.cmake) of the reentrant and
-- fair locks' release scripts, after unlock_latch.lua and delay.lua: one of
-- the owner's `count` holds (count >= 1) goes. With holds left the lease
-- ARGV[2] (ms; "0" keeps the TTL: a lock taken with an explicit lease keeps
-- its deadline) is set again, the lock-delay marker follows it, and the
-- answer is 0. The last hold deletes the lock and the marker (a lock released
-- properly is free at once); the script goes on to wake a waiter. Needs:
-- lock, owner, count, marker, delay.
if count > 1 then
  redis.call('hincrby', lock, owner, -1)
  if tonumber(ARGV[2]) > 0 then
    redis.call('pexpire', lock, ARGV[2])
    delay_extend(marker, ARGV[2], delay)
  end
  return latched(0)
end
redis.call('del', lock)
delay_clear(marker, owner)
