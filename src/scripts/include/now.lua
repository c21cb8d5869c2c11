-- Fragment (--@include, see cmake/embed_scripts.cmake): now = the server's
-- clock (TIME) in epoch ms.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
