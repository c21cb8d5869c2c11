-- Fragment (--@include, see cmake/embed_scripts.cmake) of the permit
-- semaphore's scripts on several permits: ids[1..n] = the permit ids, raw cut
-- into 16 bytes each; a length that is not a positive multiple of 16 is
-- refused before anything is read. Needs: raw.
if #raw == 0 or #raw % 16 ~= 0 then
  return redis.error_reply('ERR the permit ids are not a multiple of 16 bytes')
end
local n = #raw / 16
local ids = {}
for i = 1, n do
  ids[i] = string.sub(raw, (i - 1) * 16 + 1, i * 16)
end
