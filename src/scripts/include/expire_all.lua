-- Redisson's expire / clearExpire of an object of several keys (its
-- RedissonExpirable): every key of KEYS[1..n] gets the time to live ARGV[1]
-- in ms, or loses its own ("0": PERSIST). 1 when any key got it (or lost
-- one), 0 when none did. Needs: the keys' types checked first.
local function expire_all(n)
  local done = 0
  for i = 1, n do
    local r
    if ARGV[1] == '0' then
      r = redis.call('persist', KEYS[i])
    else
      r = redis.call('pexpire', KEYS[i], ARGV[1])
    end
    if r == 1 then
      done = 1
    end
  end
  return done
end
