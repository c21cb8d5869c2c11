-- Fragment (--@include, see cmake/embed_scripts.cmake) of the double
-- barrier's scripts: keep(state, members, ms) makes both keys live at least
-- ms more (a longer TTL, another member's longer lease, stays), so that the
-- barrier outlives its latest member's lease and no longer: when every
-- member is dead, Redis drops the keys by itself.
local function keep(state, members, ms)
  for _, k in ipairs({state, members}) do
    if redis.call('pttl', k) < ms then
      redis.call('pexpire', k, ms)
    end
  end
end
