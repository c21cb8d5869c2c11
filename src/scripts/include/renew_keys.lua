-- Fragment (--@include, see cmake/embed_scripts.cmake) of the watchdog's
-- renew scripts: keys = the keys of the batch, a = the index of ARGV before
-- the per-hold arguments (ARGV[a + i] belongs to hold i); renewed(nk, renew)
-- = the answer, one integer per hold of nk keys: 1 when renew(i) renewed
-- hold i (answered true), 0 when it is no longer held (the client reports
-- it lost).
--
-- With client tracking on (the watchdog's revocation listener) the watchdog
-- passes no KEYS: ARGV[2] = the number of keys, ARGV[3..] the keys, and the
-- per-hold arguments follow them. Redis 7.0 remembers, for every read-only
-- command a script runs, all the keys the script declared: a batch of 100
-- declared keys would cost 100 x 100 tracking-table inserts. The watchdog
-- sends EXISTS of the keys right after instead (one insert each).
local keys, a = KEYS, 1
if #KEYS == 0 then
  local n = tonumber(ARGV[2])
  keys = {}
  for i = 1, n do
    keys[i] = ARGV[2 + i]
  end
  a = 2 + n
end

local function renewed(nk, renew)
  local out = {}
  for i = 1, #keys / nk do
    out[i] = renew(i) and 1 or 0
  end
  return out
end
