-- Delete a count-down latch (Redisson's delete): it is then at zero.
--
-- KEYS[1]  the latch: a string holding the remaining count
-- KEYS[2]  its channel, redisson_countdownlatch__channel__{name}
--
-- Returns 1 when a latch was deleted ("1" is published, as Redisson does:
-- Redisson's awaiters keep sleeping, dlock's check the count and return), 0
-- when there was none. A key of another type, or a string that is not a
-- count, is somebody's data: refused (WRONGTYPE), never deleted.
local what = 'latch'
--@include count_or_zero.lua
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], '1')
return 1
