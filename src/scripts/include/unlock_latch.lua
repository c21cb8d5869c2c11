-- Fragment (--@include, see cmake/embed_scripts.cmake) of the lock types'
-- release scripts: the request's unlock latch (Redisson 4's), so that a
-- release retried after a lost reply answers what the first attempt did,
-- instead of "not held". Needs: latch (the request's key,
-- redisson_unlock_latch:{name}:<32 hex>), life (its lifetime in ms).
-- A latch already there: its answer, at once, before anything is read.
-- latched(answer) keeps `answer` for a retry and returns it.
-- released(heard) is the last hold's answer, kept as 1 (Redisson's value):
-- 2 when `heard` (PUBLISH's count of the wake-up's listeners) > 0, else 1.
local earlier = redis.call('get', latch)
if earlier then
  return tonumber(earlier)
end

local function latched(answer)
  redis.call('set', latch, answer, 'px', life)
  return answer
end

local function released(heard)
  latched(1)
  if heard > 0 then
    return 2
  end
  return 1
end
