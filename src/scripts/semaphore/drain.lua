-- Take every available permit (Redisson's drainPermits, Java's too): the
-- count becomes 0. A negative count is brought back to 0 the same way, and
-- the answer is then negative (what was given back).
--
-- KEYS[1]  the semaphore: a string holding the available permits
--
-- Returns the count there was (0 when the key does not exist). A key that
-- is not a count is refused (WRONGTYPE) and left alone. DECRBY keeps a TTL
-- the key may have.
local what = 'permit'
--@include count_or_zero.lua
local have = tonumber(v)
if have ~= 0 then
  redis.call('decrby', KEYS[1], v)
end
return have
