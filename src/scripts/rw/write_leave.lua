-- A writer-first writer stops waiting without the write lock (its wait ran
-- out, was cancelled, or failed): its intent goes (include/intent.lua), and
-- when no other writer's intent is left alive the readers it held back are
-- woken.
--
-- KEYS[1]  the lock's channel, redisson_rwlock:{name}
-- KEYS[2]  (optional) the writers' intents, dlock_write_intent:{name}
--          (dlock's own; absent when the caller's client does not use it)
-- ARGV[1]  the writer's field, <owner id>:write
--
-- Returns 1 when the intent was there and the readers were told ("1" on the
-- channel: every waiter tries again, as after a write release), else 0.
-- Nothing is published while another writer's intent lives: the readers stay
-- behind it. A key of another type is left alone.
--@include own_keys.lua
--@include intent.lua
local intent = own_keys(2)['dlock_write_intent:']
if not intent_clear(intent, ARGV[1]) or intent_left(intent, ARGV[1]) > 0 then
  return 0
end
redis.call('publish', KEYS[1], '1')
return 1
