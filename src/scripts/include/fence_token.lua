-- Fragment (--@include, see cmake/embed_scripts.cmake) of the lock types'
-- acquire scripts: the fencing token of this acquisition, returned as {token}.
-- Needs: token_key (the counter, redisson_lock_token:{name}), t (TIME).
--
-- Same script as the acquisition, so token order is acquisition order. INCR
-- as Redisson does; but never below the server's clock in microseconds, so
-- tokens keep increasing when the counter is lost with a restart without
-- persistence or a failover (2^53 is not reached before the year 2255). The
-- counter goes after a week without fenced acquisitions (dlock's own,
-- docs/wire-format.md): the clock floor keeps the next token higher than
-- every token given before, so no counter need live forever.
local token = redis.call('incr', token_key)
local floor = tonumber(t[1]) * 1000000 + tonumber(t[2])
if token < floor then
  token = floor
  redis.call('set', token_key, token)
end
redis.call('pexpire', token_key, 604800000)
return {token}
