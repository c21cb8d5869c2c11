-- Fragment (--@include, see cmake/embed_scripts.cmake) of the read-write
-- lock's release scripts: longest_hold(when, kv, prefix, skip, stop) = the
-- longest of the read holds that the lock's fields (kv, HGETALL's answer)
-- count, each key <prefix>:<field>:rwlock_timeout:<k> read with `when`
-- (PEXPIRETIME where Redis tells expiry times, else PTTL); -3 when none is
-- alive. The field `skip` counts one hold less (the one being released;
-- nil: none). The latest readers, last in the hash, are read first; with
-- `stop` (an expiry, or false) the answer is nil as soon as a hold reaches
-- it.
local function longest_hold(when, kv, prefix, skip, stop)
  local longest = -3
  for i = #kv - 1, 1, -2 do
    local n = tonumber(kv[i + 1])
    if kv[i] == skip and n then
      n = n - 1
    end
    if kv[i] ~= 'mode' and n then
      for k = n, 1, -1 do
        local t = redis.call(when, prefix .. ':' .. kv[i] .. ':rwlock_timeout:' .. k)
        if stop and t >= stop then
          return nil
        end
        if t > longest then
          longest = t
        end
      end
    end
  end
  return longest
end
