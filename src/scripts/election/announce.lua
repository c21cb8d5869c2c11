-- Announce a new leader (dlock's own): after a campaign took the election's
-- lock (a fenced acquisition: the term is its token), record who leads and
-- tell the observers, unless the term is no longer the newest or the lock was
-- lost meanwhile.
--
-- KEYS[1]  the election's lock (a reentrant lock hash, Redisson's layout)
-- KEYS[2]  its record: dlock_election:{name}, a hash: term, owner, who
-- KEYS[3]  its channel: dlock_election__channel:{name}
-- ARGV[1]  the leader's owner id (its field in the lock)
-- ARGV[2]  the term, decimal
-- ARGV[3]  who: "host pid", for observers
--
-- Returns 1 announced (the record holds the term, the term PUBLISHed), 0 not:
-- the lock is no longer held by the owner, or the record holds a newer term.
-- The record lives 7 days after its last announcement.
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local old = redis.call('hget', KEYS[2], 'term')
local t = ARGV[2]
-- Terms compare as decimal strings (exact beyond 2^53).
if old and (#old > #t or (#old == #t and old >= t)) then
  return 0
end
redis.call('hset', KEYS[2], 'term', t, 'owner', ARGV[1], 'who', ARGV[3])
redis.call('pexpire', KEYS[2], 604800000)
redis.call('publish', KEYS[3], t)
return 1
