-- Give every key of a semaphore a time to live (Redisson's expire of an
-- RSemaphore, or of an RPermitExpirableSemaphore: both its keys).
--
-- KEYS[1]  the semaphore: a string holding the available permits
-- KEYS[2]  (optional) the leases, {name}:timeout (a permit-expirable one)
-- ARGV[1]  the time to live in ms (> 0), or "0" to remove it (PERSIST)
--
-- Returns 1 when any of the keys got the TTL (or, for "0", lost one), 0
-- when none did (Redisson's rule for an object of several keys). Keys of
-- other types are refused (WRONGTYPE) and nothing is changed.
local sem = KEYS[1]
--@include permit_count.lua
--@include leases_type.lua
--@include expire_all.lua
return expire_all(#KEYS)
