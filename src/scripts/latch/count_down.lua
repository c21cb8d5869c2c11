-- Count a latch down by one (Redisson's countDown). At zero the key goes and
-- "0" is published: every awaiter, Redisson's and dlock's, wakes.
--
-- KEYS[1]  the latch: a string holding the remaining count
-- KEYS[2]  its channel, redisson_countdownlatch__channel__{name}
--
-- Returns the count left (0 when the latch was at zero already: nothing
-- changes). A key of another type, or a string that is not a count, is
-- refused (WRONGTYPE) and left alone.
local what = 'latch'
--@include count_or_zero.lua
local left = redis.call('decr', KEYS[1])
if left <= 0 then
  redis.call('del', KEYS[1])
end
if left == 0 then
  redis.call('publish', KEYS[2], '0')
end
return math.max(left, 0)
